// Package k8scheck decodes the Kubernetes manifests in deploy/kubernetes and
// deploy/kubernetes/postgres strictly into the typed objects of k8s.io/api
// (unknown, duplicate or mis-cased fields are errors, as the API server's
// strict field validation reports them), so CI checks them with no API server. The assertions about
// the agenthooks sidecar are in manifests_test.go.
package k8scheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Object is one decoded manifest document.
type Object struct {
	File  string
	Index int // document index in the file, from 0
	Obj   runtime.Object
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := appsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := policyv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// strictDecoder decodes YAML or JSON by apiVersion/kind; strict: unknown and
// duplicate fields are errors.
var strictDecoder = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()

// DecodeStrict decodes every document of one YAML stream. Empty documents
// (only comments) are skipped; any other document must decode strictly into
// a registered type.
func DecodeStrict(name string, data []byte) ([]Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Object
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if isEmptyDocument(doc) {
			continue
		}
		obj, _, err := strictDecoder.Decode(doc, nil, nil)
		if err != nil {
			// Strict errors come with a decoded object: any error fails.
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		out = append(out, Object{File: name, Index: i, Obj: obj})
	}
}

// isEmptyDocument reports whether a YAML document has only blank lines and comments.
func isEmptyDocument(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// LoadDir decodes every *.yaml and *.yml file of dir, in name order.
func LoadDir(dir string) ([]Object, error) {
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no manifests in %s", dir)
	}
	var all []Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := DecodeStrict(filepath.Base(f), data)
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	return all, nil
}
