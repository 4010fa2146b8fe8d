package k8scheck

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// manifestDirs are the examples, from test/k8s: one pod on SQLite
// (deploy/kubernetes) and a fleet on PostgreSQL (deploy/kubernetes/postgres).
// K8SCHECK_DIR checks that one folder instead.
var manifestDirs = func() []string {
	if d := os.Getenv("K8SCHECK_DIR"); d != "" {
		return []string{d}
	}
	return []string{"../../deploy/kubernetes", "../../deploy/kubernetes/postgres"}
}()

// fleetDir is the example of several replicas on one PostgreSQL store.
const fleetDir = "../../deploy/kubernetes/postgres"

// sidecarName is the agenthooks container's name.
const sidecarName = "agenthooks"

// Defaults baked into the image (Dockerfile ENV) and the sidecar (config.ts).
var imageEnvDefaults = map[string]string{
	"AGENTHOOKS_GRPC_LISTEN":    "0.0.0.0:50051",
	"AGENTHOOKS_HEALTH_LISTEN":  "0.0.0.0:50052",
	"AGENTHOOKS_HTTP_LISTEN":    "0.0.0.0:8080",
	"AGENTHOOKS_ADMIN_LISTEN":   "127.0.0.1:8081",
	"AGENTHOOKS_DB":             "/var/lib/agenthooks/agenthooks.db",
	"AGENTHOOKS_SHUTDOWN_GRACE": "10",
}

// flagEnv maps the flags checked here to their variables.
var flagEnv = map[string]string{
	"grpc-listen":       "AGENTHOOKS_GRPC_LISTEN",
	"health-listen":     "AGENTHOOKS_HEALTH_LISTEN",
	"http-listen":       "AGENTHOOKS_HTTP_LISTEN",
	"admin-listen":      "AGENTHOOKS_ADMIN_LISTEN",
	"metrics-listen":    "AGENTHOOKS_METRICS_LISTEN",
	"auth-token-file":   "AGENTHOOKS_AUTH_TOKEN_FILE",
	"db":                "AGENTHOOKS_DB",
	"hooks-env-file":    "AGENTHOOKS_ENV_FILE",
	"plugins-file":      "AGENTHOOKS_PLUGINS_FILE",
	"shutdown-grace":    "AGENTHOOKS_SHUTDOWN_GRACE",
	"socket-mode":       "AGENTHOOKS_SOCKET_MODE",
	"socket-group":      "AGENTHOOKS_SOCKET_GROUP",
	"max-message-bytes": "AGENTHOOKS_MAX_MESSAGE_BYTES",
}

func TestStrictDecodingRejectsBadManifests(t *testing.T) {
	cases := map[string]string{
		"unknown field": `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
dataa: {a: b}
`,
		"misspelt nested field": `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      initContainers:
        - name: s
          image: i
          restartPolicyy: Always
      containers: [{name: c, image: i}]
`,
		"wrong case": `
apiVersion: v1
kind: Secret
metadata: {name: x}
StringData: {a: b}
`,
		"duplicate field": `
apiVersion: v1
kind: ConfigMap
metadata: {name: x}
data: {a: b}
data: {c: d}
`,
		"wrong type": `
apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  replicas: "one"
`,
		"unknown kind": `
apiVersion: v1
kind: NotAKind
metadata: {name: x}
`,
	}
	for name, doc := range cases {
		_, err := DecodeStrict(name, []byte(doc))
		if err == nil {
			t.Errorf("%s: decoded without error, want a strict decoding error", name)
		}
		t.Logf("%s: %v", name, err)
	}
	good := "# comment only\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n"
	objs, err := DecodeStrict("good", []byte(good))
	if err != nil || len(objs) != 1 {
		t.Fatalf("a valid ConfigMap: %d objects, error %v", len(objs), err)
	}
}

// manifests holds the decoded manifests of one folder by kind.
type manifests struct {
	dir         string
	deployments []*appsv1.Deployment
	configMaps  map[string]*corev1.ConfigMap
	secrets     map[string]*corev1.Secret
	budgets     []*policyv1.PodDisruptionBudget
}

func load(t *testing.T, dir string) manifests {
	t.Helper()
	objs, err := LoadDir(dir)
	if err != nil {
		t.Fatalf("strict decoding: %v", err)
	}
	m := manifests{dir: dir, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
	for _, o := range objs {
		switch v := o.Obj.(type) {
		case *appsv1.Deployment:
			m.deployments = append(m.deployments, v)
		case *corev1.ConfigMap:
			m.configMaps[v.Name] = v
		case *corev1.Secret:
			m.secrets[v.Name] = v
		case *policyv1.PodDisruptionBudget:
			m.budgets = append(m.budgets, v)
		default:
			t.Errorf("%s document %d: unexpected kind %T", o.File, o.Index, o.Obj)
		}
	}
	if len(m.deployments) != 1 {
		t.Fatalf("want exactly one Deployment in %s, got %d", dir, len(m.deployments))
	}
	return m
}

// settings reads the sidecar's command line and literal environment the way
// agenthooks does: a flag wins over its variable, which wins over the image's
// default. Only the last value of a flag is kept, except grpc-listen.
type settings struct {
	flags map[string][]string
	env   map[string]string
}

func newSettings(c *corev1.Container) settings {
	s := settings{flags: map[string][]string{}, env: map[string]string{}}
	// The command too, for flags written there; a shell script is one word.
	args := append(append([]string{}, c.Command...), c.Args...)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !hasValue && i+1 < len(args) {
			i++
			value = args[i]
		}
		s.flags[name] = append(s.flags[name], value)
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			s.env[e.Name] = e.Value
		}
	}
	return s
}

func (s settings) all(flag string) []string {
	if v := s.flags[flag]; len(v) > 0 {
		return v
	}
	name := flagEnv[flag]
	v, ok := s.env[name]
	if !ok || v == "" {
		v = imageEnvDefaults[name]
	}
	if v == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (s settings) one(flag string) string {
	v := s.all(flag)
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// mountFor returns the container's mount whose path holds file (the deepest one).
func mountFor(c *corev1.Container, file string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		if strings.HasPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/") &&
			(best == nil || len(m.MountPath) > len(best.MountPath)) {
			best = m
		}
	}
	return best
}

func volume(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func boolTrue(b *bool) bool { return b != nil && *b }

func TestDeploymentRunsAgenthooksAsANativeSidecar(t *testing.T) {
	for _, dir := range manifestDirs {
		t.Run(path.Base(dir), func(t *testing.T) { checkDeployment(t, load(t, dir)) })
	}
}

// checkDeployment asserts the sidecar of the one Deployment of a folder.
func checkDeployment(t *testing.T, m manifests) {
	d := m.deployments[0]
	spec := &d.Spec.Template.Spec

	if d.Spec.Selector == nil {
		t.Fatal("the Deployment has no selector")
	}
	sel, err := labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the selector %v does not match the pod labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}

	// The sidecar: an init container with restartPolicy Always.
	var sidecar *corev1.Container
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == sidecarName {
			sidecar = &spec.InitContainers[i]
		}
	}
	for _, c := range spec.Containers {
		if c.Name == sidecarName {
			t.Errorf("%s is a regular container; it must be an init container with restartPolicy Always", sidecarName)
		}
	}
	if sidecar == nil {
		t.Fatalf("no init container named %s", sidecarName)
	}
	if sidecar.RestartPolicy == nil || *sidecar.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		got := "unset"
		if sidecar.RestartPolicy != nil {
			got = string(*sidecar.RestartPolicy)
		}
		t.Errorf("%s: restartPolicy is %s, want Always (a native sidecar)", sidecarName, got)
	}
	if len(spec.Containers) == 0 {
		t.Fatal("no agent container")
	}
	s := newSettings(sidecar)

	// Probes: gRPC on the health-only listener.
	health := s.one("health-listen")
	if health == "" {
		t.Fatalf("%s: no --health-listen / AGENTHOOKS_HEALTH_LISTEN", sidecarName)
	}
	host, portText, err := net.SplitHostPort(health)
	if err != nil {
		t.Fatalf("%s: health listener %q is not host:port: %v", sidecarName, health, err)
	}
	healthPort, err := strconv.Atoi(portText)
	if err != nil {
		t.Fatalf("%s: health listener %q has no numeric port", sidecarName, health)
	}
	if host != "0.0.0.0" && host != "::" {
		t.Errorf("%s: health listener %q is not reachable by kubelet (listen on 0.0.0.0)", sidecarName, health)
	}
	probes := map[string]*corev1.Probe{"readinessProbe": sidecar.ReadinessProbe, "livenessProbe": sidecar.LivenessProbe}
	if sidecar.StartupProbe != nil {
		probes["startupProbe"] = sidecar.StartupProbe
	}
	for name, p := range probes {
		switch {
		case p == nil:
			t.Errorf("%s: no %s", sidecarName, name)
		case p.GRPC == nil || p.HTTPGet != nil || p.TCPSocket != nil || p.Exec != nil:
			t.Errorf("%s: %s is not a gRPC probe", sidecarName, name)
		case int(p.GRPC.Port) != healthPort:
			t.Errorf("%s: %s probes port %d, the health-only listener is %d", sidecarName, name, p.GRPC.Port, healthPort)
		}
	}
	for _, p := range probeServiceProblems(sidecar) {
		t.Error(p)
	}

	// The API on no TCP port without a token; metrics on their own port.
	for _, p := range listenerProblems(sidecar) {
		t.Error(p)
	}

	// The unix socket on a shared emptyDir.
	var socket string
	for _, l := range s.all("grpc-listen") {
		if strings.HasPrefix(l, "unix:") {
			socket = strings.TrimPrefix(l, "unix:")
		}
	}
	if socket == "" {
		t.Fatalf("%s: no unix: gRPC listener in %v", sidecarName, s.all("grpc-listen"))
	}
	sidecarMount := mountFor(sidecar, socket)
	if sidecarMount == nil {
		t.Fatalf("%s: the socket %s is on no volume", sidecarName, socket)
	}
	if v := volume(spec, sidecarMount.Name); v == nil || v.EmptyDir == nil {
		t.Errorf("the socket volume %s is not an emptyDir", sidecarMount.Name)
	}
	socketRel := strings.TrimPrefix(socket, strings.TrimSuffix(sidecarMount.MountPath, "/")+"/")
	var agents []*corev1.Container
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for _, vm := range c.VolumeMounts {
			if vm.Name != sidecarMount.Name {
				continue
			}
			agents = append(agents, c)
			agentSocket := path.Join(vm.MountPath, socketRel)
			found := false
			for _, e := range c.Env {
				found = found || strings.Contains(e.Value, agentSocket)
			}
			if !found {
				t.Errorf("container %s mounts the socket volume but no env var names %s", c.Name, agentSocket)
			}
		}
	}
	if len(agents) == 0 {
		t.Errorf("no agent container mounts the socket volume %s", sidecarMount.Name)
	}

	// The image's entrypoint, no shell; the agents connect through a shared group.
	for _, p := range entrypointProblems(sidecar) {
		t.Error(p)
	}
	for _, p := range socketAccessProblems(spec, sidecar, agents) {
		t.Error(p)
	}
	ps := spec.SecurityContext
	if ps == nil || ps.FSGroup == nil {
		t.Errorf("the pod sets no fsGroup: the socket folder is not shared by group")
	}

	// Security: non-root, read-only root filesystem, no privilege escalation.
	all := append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...)
	for _, c := range all {
		sc := c.SecurityContext
		// The container's setting wins over the pod's.
		nonRoot := ps != nil && boolTrue(ps.RunAsNonRoot)
		if sc != nil && sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		if !nonRoot {
			t.Errorf("%s: runAsNonRoot is not true", c.Name)
		}
		if sc == nil || !boolTrue(sc.ReadOnlyRootFilesystem) {
			t.Errorf("%s: readOnlyRootFilesystem is not true", c.Name)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", c.Name)
		}
		if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			t.Errorf("%s: runAsUser is 0", c.Name)
		}
		// Resource requests.
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
				t.Errorf("%s: no %s request", c.Name, r)
			}
		}
	}
	if q, ok := sidecar.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Errorf("%s: no memory limit", sidecarName)
	} else if p := memoryProblem(sidecar, q.Value()); p != "" {
		t.Error(p)
	}

	// The store: an SQLite file on a volume for one replica, else PostgreSQL
	// with its password from a Secret.
	for _, p := range storeProblems(m, d, sidecar) {
		t.Error(p)
	}
	// A fleet keeps all but one replica through a voluntary disruption.
	if replicas(d) > 1 {
		for _, p := range budgetProblems(m, d) {
			t.Error(p)
		}
	}

	// The env file from a ConfigMap volume.
	envFile := s.one("hooks-env-file")
	if envFile == "" {
		t.Errorf("%s: no AGENTHOOKS_ENV_FILE / --hooks-env-file", sidecarName)
	} else if text, ok := configMapFile(t, m, spec, sidecar, envFile, "env file"); ok {
		vars := parseEnvFile(text)
		for _, want := range []string{"AGENT_HOOK_WEBHOOK_URL", "AGENT_HOOK_WEBHOOK_EVENTS"} {
			if vars[want] == "" {
				t.Errorf("the env file %s does not set %s", envFile, want)
			}
		}
		if _, ok := vars["AGENT_HOOK_WEBHOOK_TOKEN"]; ok {
			t.Errorf("the env file %s sets the token: it belongs in the Secret", envFile)
		}
	}

	// The operator plugins file, when set, from a ConfigMap volume too, and JSON
	// the sidecar reads: an unreadable one fails every Modify call closed.
	if pluginsFile := s.one("plugins-file"); pluginsFile != "" {
		if text, ok := configMapFile(t, m, spec, sidecar, pluginsFile, "plugins file"); ok {
			var doc struct {
				Plugins []struct {
					Name  string            `json:"name"`
					Hooks []json.RawMessage `json:"hooks"`
				} `json:"plugins"`
			}
			dec := json.NewDecoder(strings.NewReader(text))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&doc); err != nil {
				t.Errorf("the plugins file %s is not JSON of the documented shape: %v", pluginsFile, err)
			} else if doc.Plugins == nil {
				t.Errorf("the plugins file %s has no plugins array", pluginsFile)
			}
		}
	}

	// The token from a Secret.
	var token *corev1.EnvVar
	for i := range sidecar.Env {
		if sidecar.Env[i].Name == "AGENT_HOOK_WEBHOOK_TOKEN" {
			token = &sidecar.Env[i]
		}
	}
	switch {
	case token == nil:
		t.Errorf("%s: no AGENT_HOOK_WEBHOOK_TOKEN", sidecarName)
	case token.Value != "" || token.ValueFrom == nil || token.ValueFrom.SecretKeyRef == nil:
		t.Errorf("%s: AGENT_HOOK_WEBHOOK_TOKEN does not come from a secretKeyRef", sidecarName)
	default:
		ref := token.ValueFrom.SecretKeyRef
		sec, ok := m.secrets[ref.Name]
		if !ok {
			t.Errorf("the Secret %s is not in %s", ref.Name, m.dir)
		} else if _, inData := sec.Data[ref.Key]; !inData && sec.StringData[ref.Key] == "" {
			t.Errorf("the Secret %s has no key %s", ref.Name, ref.Key)
		}
	}

	// Termination: longer than the sidecar's shutdown grace.
	grace, err := strconv.ParseFloat(s.one("shutdown-grace"), 64)
	if err != nil {
		t.Errorf("%s: shutdown grace %q is not a number", sidecarName, s.one("shutdown-grace"))
	}
	if tg := spec.TerminationGracePeriodSeconds; tg == nil || float64(*tg) <= grace {
		got := "unset (30)"
		if tg != nil {
			got = strconv.FormatInt(*tg, 10)
		}
		t.Errorf("terminationGracePeriodSeconds %s is not more than the sidecar's shutdown grace %v s", got, grace)
	}
}

// Memory sizing: a sidecar's resident memory at rest with a large hook
// cache (about 145 MiB, BENCHMARKS.md rss-10k), and the memory one large
// request costs while its webhooks are sent (its decoded strings and each
// webhook's JSON body: about 11 times its encoded size, measured with one
// 16 MiB Dispatch to two webhooks), for a few such calls at once.
const (
	restingBytes        = 145 << 20
	bytesPerMessageByte = 11
	largeCallsAtOnce    = 4
	defaultMaxMessage   = 16 << 20
)

// memoryProblem reports a memory limit that a few requests of the largest
// size the sidecar accepts (--max-message-bytes) would exceed.
func memoryProblem(sidecar *corev1.Container, limit int64) string {
	maxMessage := int64(defaultMaxMessage)
	if v := newSettings(sidecar).one("max-message-bytes"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Sprintf("%s: --max-message-bytes %q is not a number", sidecar.Name, v)
		}
		maxMessage = n
	}
	need := restingBytes + largeCallsAtOnce*bytesPerMessageByte*maxMessage
	if limit < need {
		return fmt.Sprintf("%s: memory limit %d MiB is below %d MiB, what %d requests of --max-message-bytes %d need at once", sidecar.Name, limit>>20, need>>20, largeCallsAtOnce, maxMessage)
	}
	return ""
}

// listenerProblems reports a sidecar that serves the API (a TCP gRPC or HTTP
// listener) without a bearer token, which any process in the pod (loopback
// included) could call, and one whose /metrics and /healthz are not on a
// --metrics-listen port of their own.
func listenerProblems(sidecar *corev1.Container) []string {
	s := newSettings(sidecar)
	var problems []string
	token := s.one("auth-token-file") != ""
	for _, e := range sidecar.Env {
		token = token || (e.Name == "AGENTHOOKS_AUTH_TOKEN" && (e.Value != "" || e.ValueFrom != nil))
	}
	api := []string{}
	for _, l := range s.all("grpc-listen") {
		if !strings.HasPrefix(l, "unix:") {
			api = append(api, "--grpc-listen "+l)
		}
	}
	if h := s.one("http-listen"); h != "" && h != "off" {
		api = append(api, "--http-listen "+h)
	}
	if !token {
		for _, l := range api {
			problems = append(problems, fmt.Sprintf("%s: %s serves the API on TCP without a token: any process in the pod can call it", sidecarName, l))
		}
		// The read-only console shows the config, the hooks and live decisions.
		if a := s.one("admin-listen"); a != "" && a != "off" {
			problems = append(problems, fmt.Sprintf("%s: --admin-listen %s serves the admin console on TCP without a token: any process in the pod can read it", sidecarName, a))
		}
	}
	metrics := s.one("metrics-listen")
	_, metricsPort, err := net.SplitHostPort(metrics)
	switch {
	case metrics == "" || metrics == "off":
		problems = append(problems, fmt.Sprintf("%s: no --metrics-listen / AGENTHOOKS_METRICS_LISTEN for /metrics and /healthz", sidecarName))
	case err != nil:
		problems = append(problems, fmt.Sprintf("%s: metrics listener %q is not host:port", sidecarName, metrics))
	default:
		others := append([]string{s.one("health-listen")}, s.all("grpc-listen")...)
		if h := s.one("http-listen"); h != "off" {
			others = append(others, h)
		}
		for _, o := range others {
			if _, p, err := net.SplitHostPort(o); err == nil && p == metricsPort {
				problems = append(problems, fmt.Sprintf("%s: the metrics listener shares port %s with %s", sidecarName, p, o))
			}
		}
		declared := false
		for _, cp := range sidecar.Ports {
			declared = declared || strconv.Itoa(int(cp.ContainerPort)) == metricsPort
		}
		if !declared {
			problems = append(problems, fmt.Sprintf("%s: the metrics port %s is not a containerPort", sidecarName, metricsPort))
		}
	}
	return problems
}

func TestListenerChecksCatchExposedAPIs(t *testing.T) {
	base := load(t, manifestDirs[0]).deployments[0]
	cases := []struct {
		name   string
		bad    bool
		change func(c *corev1.Container)
	}{
		{"the manifest as it is", false, func(*corev1.Container) {}},
		{"the HTTP API on loopback without a token", true, func(c *corev1.Container) {
			c.Env = append(c.Env, corev1.EnvVar{Name: "AGENTHOOKS_HTTP_LISTEN", Value: "127.0.0.1:8080"})
		}},
		{"the image's default listeners", true, func(c *corev1.Container) {
			env := c.Env[:0]
			for _, e := range c.Env {
				if e.Name != "AGENTHOOKS_HTTP_LISTEN" && e.Name != "AGENTHOOKS_GRPC_LISTEN" {
					env = append(env, e)
				}
			}
			c.Env = env
		}},
		{"the admin console at its default, without a token", true, func(c *corev1.Container) {
			env := c.Env[:0]
			for _, e := range c.Env {
				if e.Name != "AGENTHOOKS_ADMIN_LISTEN" {
					env = append(env, e)
				}
			}
			c.Env = env
		}},
		{"a TCP API behind a token", false, func(c *corev1.Container) {
			c.Args = []string{"serve", "--http-listen", "127.0.0.1:8080", "--auth-token-file", "/run/secrets/token"}
		}},
		{"no metrics listener", true, func(c *corev1.Container) {
			c.Args = []string{"serve", "--metrics-listen", "off"}
		}},
		{"metrics on the health port", true, func(c *corev1.Container) {
			c.Args = []string{"serve", "--metrics-listen", "0.0.0.0:50052"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := base.DeepCopy()
			var sidecar *corev1.Container
			for i := range d.Spec.Template.Spec.InitContainers {
				if d.Spec.Template.Spec.InitContainers[i].Name == sidecarName {
					sidecar = &d.Spec.Template.Spec.InitContainers[i]
				}
			}
			if sidecar == nil {
				t.Fatalf("no init container named %s", sidecarName)
			}
			tc.change(sidecar)
			problems := listenerProblems(sidecar)
			if tc.bad && len(problems) == 0 {
				t.Error("no problem reported")
			}
			if !tc.bad && len(problems) > 0 {
				t.Errorf("problems reported: %v", problems)
			}
		})
	}
}

// entrypointProblems reports a sidecar that does not run the image's
// ENTRYPOINT (node /app/dist/src/main.js) and CMD (serve): a command (a shell
// wrapper such as sh -c 'umask ...; exec node ...' included) replaces the
// ENTRYPOINT, and args replace the CMD, so they must start with serve.
func entrypointProblems(sidecar *corev1.Container) []string {
	var out []string
	if len(sidecar.Command) > 0 {
		out = append(out, fmt.Sprintf("%s: command %q replaces the image's ENTRYPOINT: "+
			"drop it and configure the sidecar with AGENTHOOKS_* variables (or flags in args)", sidecar.Name, sidecar.Command))
	}
	if len(sidecar.Args) > 0 && sidecar.Args[0] != "serve" {
		out = append(out, fmt.Sprintf("%s: args %q replace the image's CMD but do not start with serve", sidecar.Name, sidecar.Args))
	}
	return out
}

// socketModeSyntax is what --socket-mode accepts (config.ts SOCKET_MODE).
var socketModeSyntax = regexp.MustCompile(`^0?[0-7]{3}$`)

// socketAccessProblems reports why the containers that mount the socket
// volume (agents) could not connect to the sidecar's unix socket, or why
// others could: the sidecar must set --socket-mode / AGENTHOOKS_SOCKET_MODE
// to 0660 or narrower that keeps group read and write (connect needs write),
// and --socket-group / AGENTHOOKS_SOCKET_GROUP to a numeric GID that is the
// pod's fsGroup or one of its supplementalGroups, hence a group of the
// sidecar (which may only chown the socket to its own groups) and of every agent.
func socketAccessProblems(spec *corev1.PodSpec, sidecar *corev1.Container, agents []*corev1.Container) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	s := newSettings(sidecar)

	modeText := s.one("socket-mode")
	switch mode, err := strconv.ParseUint(modeText, 8, 32); {
	case modeText == "":
		add("%s: the socket mode is not set: set AGENTHOOKS_SOCKET_MODE (or --socket-mode) to 0660", sidecar.Name)
	case !socketModeSyntax.MatchString(modeText) || err != nil:
		add("%s: socket mode %q is not an octal mode such as 0660", sidecar.Name, modeText)
	case mode&^0o660 != 0:
		add("%s: socket mode %s grants more than 0660 (%04o beyond it): only the owner and the group may connect",
			sidecar.Name, modeText, mode&^0o660)
	case mode&0o060 != 0o060:
		add("%s: socket mode %s lacks group read and write (0060): the agent connects through the group", sidecar.Name, modeText)
	}

	groupText := s.one("socket-group")
	if groupText == "" {
		add("%s: the socket group is not set: set AGENTHOOKS_SOCKET_GROUP (or --socket-group) to the pod's fsGroup", sidecar.Name)
		return out
	}
	gid, err := strconv.ParseInt(groupText, 10, 64)
	if err != nil || gid < 0 {
		add("%s: socket group %q is not a numeric GID (a name depends on the image's /etc/group and cannot be checked against the pod)",
			sidecar.Name, groupText)
		return out
	}
	ps := spec.SecurityContext
	if ps == nil {
		ps = &corev1.PodSecurityContext{}
	}
	podGroups := append([]int64{}, ps.SupplementalGroups...)
	if ps.FSGroup != nil {
		podGroups = append(podGroups, *ps.FSGroup)
	}
	if !slices.Contains(podGroups, gid) {
		add("%s: socket group %d is neither the pod's fsGroup nor one of its supplementalGroups %v", sidecar.Name, gid, podGroups)
	}
	for _, c := range append([]*corev1.Container{sidecar}, agents...) {
		if !slices.Contains(containerGroups(ps, c), gid) {
			add("%s is not in the socket group %d (its groups: %v)", c.Name, gid, containerGroups(ps, c))
		}
	}
	return out
}

// containerGroups returns the GIDs a container's processes are known to have:
// its runAsGroup (the container's, else the pod's), the pod's
// supplementalGroups and fsGroup. A GID from the image's USER alone is unknown.
func containerGroups(ps *corev1.PodSecurityContext, c *corev1.Container) []int64 {
	var out []int64
	if c.SecurityContext != nil && c.SecurityContext.RunAsGroup != nil {
		out = append(out, *c.SecurityContext.RunAsGroup)
	} else if ps.RunAsGroup != nil {
		out = append(out, *ps.RunAsGroup)
	}
	out = append(out, ps.SupplementalGroups...)
	if ps.FSGroup != nil {
		out = append(out, *ps.FSGroup)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestSocketChecksCatchBadSidecars runs entrypointProblems and
// socketAccessProblems on variants of the Deployment's pod: each bad variant
// must be reported, each good one must pass.
func TestSocketChecksCatchBadSidecars(t *testing.T) {
	base := load(t, manifestDirs[0]).deployments[0]
	// setEnv sets (value != "") or removes a literal variable of the sidecar.
	setEnv := func(c *corev1.Container, name, value string) {
		env := c.Env[:0]
		for _, e := range c.Env {
			if e.Name != name {
				env = append(env, e)
			}
		}
		if value != "" {
			env = append(env, corev1.EnvVar{Name: name, Value: value})
		}
		c.Env = env
	}
	cases := []struct {
		name   string
		bad    bool
		change func(spec *corev1.PodSpec, sidecar *corev1.Container)
	}{
		{"the manifest as it is", false, func(*corev1.PodSpec, *corev1.Container) {}},
		{"the old umask wrapper", true, func(_ *corev1.PodSpec, c *corev1.Container) {
			c.Command = []string{"/bin/sh", "-c", `umask 0007 && exec node /app/dist/src/main.js serve "$@"`, "agenthooks"}
			setEnv(c, "AGENTHOOKS_SOCKET_MODE", "")
			setEnv(c, "AGENTHOOKS_SOCKET_GROUP", "")
		}},
		{"a command without a shell", true, func(_ *corev1.PodSpec, c *corev1.Container) {
			c.Command = []string{"node", "/app/dist/src/main.js", "serve"}
		}},
		{"args without serve", true, func(_ *corev1.PodSpec, c *corev1.Container) {
			c.Args = []string{"--socket-mode", "0660"}
		}},
		{"flags in args after serve", false, func(_ *corev1.PodSpec, c *corev1.Container) {
			setEnv(c, "AGENTHOOKS_SOCKET_MODE", "")
			setEnv(c, "AGENTHOOKS_SOCKET_GROUP", "")
			c.Args = []string{"serve", "--socket-mode", "0660", "--socket-group=10001"}
		}},
		{"a flag in args overriding the variable", true, func(_ *corev1.PodSpec, c *corev1.Container) {
			c.Args = []string{"serve", "--socket-mode", "0666"}
		}},
		{"mode unset", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "") }},
		{"mode 660", false, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "660") }},
		{"mode 0060", false, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "0060") }},
		{"mode 0666", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "0666") }},
		{"mode 0770", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "0770") }},
		{"mode 0640", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "0640") }},
		{"mode 0600", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "0600") }},
		{"mode 0968", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_MODE", "0968") }},
		{"group unset", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_GROUP", "") }},
		{"a group name", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_GROUP", "agenthooks") }},
		{"the agent's own group", true, func(_ *corev1.PodSpec, c *corev1.Container) { setEnv(c, "AGENTHOOKS_SOCKET_GROUP", "10002") }},
		{"a supplemental group", false, func(spec *corev1.PodSpec, c *corev1.Container) {
			spec.SecurityContext.SupplementalGroups = []int64{20000}
			setEnv(c, "AGENTHOOKS_SOCKET_GROUP", "20000")
		}},
		{"no pod security context", true, func(spec *corev1.PodSpec, _ *corev1.Container) { spec.SecurityContext = nil }},
	}
	for _, tc := range cases {
		d := base.DeepCopy()
		spec := &d.Spec.Template.Spec
		var sidecar *corev1.Container
		for i := range spec.InitContainers {
			if spec.InitContainers[i].Name == sidecarName {
				sidecar = &spec.InitContainers[i]
			}
		}
		if sidecar == nil {
			t.Fatalf("no init container named %s", sidecarName)
		}
		tc.change(spec, sidecar)
		var agents []*corev1.Container
		for i := range spec.Containers {
			agents = append(agents, &spec.Containers[i])
		}
		problems := append(entrypointProblems(sidecar), socketAccessProblems(spec, sidecar, agents)...)
		switch {
		case tc.bad && len(problems) == 0:
			t.Errorf("%s: no problem reported", tc.name)
		case !tc.bad && len(problems) > 0:
			t.Errorf("%s: unexpected problems %q", tc.name, problems)
		}
		t.Logf("%s: %q", tc.name, problems)
	}
}

// parseEnvFile reads KEY=VALUE lines (comments, blanks and `export ` allowed).
func parseEnvFile(text string) map[string]string {
	vars := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if ok {
			vars[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
		}
	}
	return vars
}

// configMapFile finds the ConfigMap behind the file `path` the sidecar reads:
// mounted as a folder (a subPath mount never sees an update), from a ConfigMap
// in the manifests with that key. It answers the file's text.
func configMapFile(t *testing.T, m manifests, spec *corev1.PodSpec, sidecar *corev1.Container, path, what string) (string, bool) {
	t.Helper()
	mount := mountFor(sidecar, path)
	if mount == nil {
		t.Errorf("%s: the %s %s is on no volume", sidecarName, what, path)
		return "", false
	}
	if mount.SubPath != "" {
		t.Errorf("%s: the %s volume uses subPath, so ConfigMap updates never arrive", sidecarName, what)
		return "", false
	}
	v := volume(spec, mount.Name)
	if v == nil || v.ConfigMap == nil {
		t.Errorf("%s: the %s volume %s is not a ConfigMap", sidecarName, what, mount.Name)
		return "", false
	}
	key := strings.TrimPrefix(path, strings.TrimSuffix(mount.MountPath, "/")+"/")
	for _, item := range v.ConfigMap.Items {
		if item.Path == key {
			key = item.Key
		}
	}
	cm, ok := m.configMaps[v.ConfigMap.Name]
	switch {
	case !ok:
		t.Errorf("the ConfigMap %s is not in %s", v.ConfigMap.Name, m.dir)
		return "", false
	case cm.Data[key] == "":
		t.Errorf("the ConfigMap %s has no key %s", cm.Name, key)
		return "", false
	}
	return cm.Data[key], true
}

// replicas is a Deployment's replica count (1 when unset, as the API defaults it).
func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// probeServiceProblems reports probes that do not name the health service
// their job needs: liveness (and startup, which kills the container when it
// fails too) on `liveness`, which stays SERVING while the database is down,
// so that kubelet never restarts a sidecar for an outage a restart cannot
// fix; readiness on `readiness`, which takes the pod out of service meanwhile.
func probeServiceProblems(sidecar *corev1.Container) []string {
	want := []struct {
		name    string
		probe   *corev1.Probe
		service string
	}{
		{"livenessProbe", sidecar.LivenessProbe, "liveness"},
		{"readinessProbe", sidecar.ReadinessProbe, "readiness"},
		{"startupProbe", sidecar.StartupProbe, "liveness"},
	}
	var out []string
	for _, w := range want {
		if w.probe == nil || w.probe.GRPC == nil {
			continue // reported by the caller
		}
		got := "no service (the server's status, which follows readiness)"
		if w.probe.GRPC.Service != nil {
			got = fmt.Sprintf("service %q", *w.probe.GRPC.Service)
		}
		if w.probe.GRPC.Service == nil || *w.probe.GRPC.Service != w.service {
			out = append(out, fmt.Sprintf("%s: %s asks for %s, want service %q", sidecarName, w.name, got, w.service))
		}
	}
	return out
}

// secretValue returns the value of a secretKeyRef from the Secrets of the folder.
func secretValue(m manifests, ref *corev1.SecretKeySelector) (string, bool) {
	sec, ok := m.secrets[ref.Name]
	if !ok {
		return "", false
	}
	if v, ok := sec.Data[ref.Key]; ok {
		return string(v), true
	}
	v, ok := sec.StringData[ref.Key]
	return v, ok && v != ""
}

// isPostgresURL reports whether a --db value names the PostgreSQL store.
func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// storeProblems reports a sidecar whose store does not fit its Deployment:
// several replicas on SQLite (each pod would keep its own hooks and parked
// calls, so an approval resuming on another pod finds nothing); an SQLite
// file not on a writable volume; a PostgreSQL password in args or in a
// literal value of the manifest (args show in ps, the manifest in every
// `kubectl get -o yaml`); no password from a Secret at all; and a PostgreSQL
// connection without TLS, or with a CA file on no volume.
func storeProblems(m manifests, d *appsv1.Deployment, sidecar *corev1.Container) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	spec := &d.Spec.Template.Spec
	s := newSettings(sidecar)
	env := map[string]*corev1.EnvVar{}
	for i := range sidecar.Env {
		env[sidecar.Env[i].Name] = &sidecar.Env[i]
	}
	for _, v := range s.flags["db"] {
		if u, err := url.Parse(v); err == nil && isPostgresURL(v) {
			if _, has := u.User.Password(); has {
				add("%s: --db in args carries a password, which ps shows: use AGENTHOOKS_DB or PGPASSWORD from a Secret", sidecarName)
			}
		}
	}
	db := s.one("db")
	fromSecret := false
	if e := env["AGENTHOOKS_DB"]; len(s.flags["db"]) == 0 && e != nil && e.ValueFrom != nil {
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil {
			add("%s: AGENTHOOKS_DB comes from neither a literal nor a secretKeyRef", sidecarName)
			return out
		}
		v, ok := secretValue(m, ref)
		if !ok {
			add("%s: AGENTHOOKS_DB names the key %s of the Secret %s, which is not in %s", sidecarName, ref.Key, ref.Name, m.dir)
			return out
		}
		db, fromSecret = v, true
	}

	if !isPostgresURL(db) {
		if n := replicas(d); n > 1 {
			add("%d replicas on the SQLite file %s: each pod keeps its own hooks and parked calls; use a postgres:// store", n, db)
		}
		// The database on a volume (the root filesystem is read-only).
		if dm := mountFor(sidecar, db); dm == nil {
			add("%s: the database %s is on no volume", sidecarName, db)
		} else if v := volume(spec, dm.Name); v == nil || (v.EmptyDir == nil && v.PersistentVolumeClaim == nil) {
			add("%s: the database volume %s is neither an emptyDir nor a PVC", sidecarName, dm.Name)
		} else if dm.ReadOnly {
			add("%s: the database volume is mounted read-only", sidecarName)
		}
		return out
	}

	u, err := url.Parse(db)
	if err != nil {
		add("%s: the database URL does not parse: %v", sidecarName, err)
		return out
	}
	_, urlPassword := u.User.Password()
	if urlPassword && !fromSecret {
		add("%s: the AGENTHOOKS_DB URL in the manifest carries a password: take it from a Secret (PGPASSWORD, or the whole URL)", sidecarName)
	}
	passwordFromSecret := false
	if e := env["PGPASSWORD"]; e != nil {
		switch {
		case e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil:
			add("%s: PGPASSWORD is not taken from a secretKeyRef", sidecarName)
		default:
			if _, ok := secretValue(m, e.ValueFrom.SecretKeyRef); !ok {
				add("%s: PGPASSWORD names the key %s of the Secret %s, which is not in %s",
					sidecarName, e.ValueFrom.SecretKeyRef.Key, e.ValueFrom.SecretKeyRef.Name, m.dir)
			} else {
				passwordFromSecret = true
			}
		}
	}
	if e := env["PGPASSFILE"]; e != nil && e.Value != "" {
		if pm := mountFor(sidecar, e.Value); pm != nil {
			if v := volume(spec, pm.Name); v != nil && v.Secret != nil {
				passwordFromSecret = true
			}
		}
	}
	if !passwordFromSecret && !(fromSecret && urlPassword) {
		add("%s: no database password from a Secret: set PGPASSWORD (or AGENTHOOKS_DB) from a secretKeyRef, or PGPASSFILE on a Secret volume", sidecarName)
	}
	q := u.Query()
	switch q.Get("sslmode") {
	case "require", "verify-ca", "verify-full":
	default:
		add("%s: the database connection does not require TLS (sslmode=%q): it crosses the cluster network", sidecarName, q.Get("sslmode"))
	}
	if ca := q.Get("sslrootcert"); ca != "" && mountFor(sidecar, ca) == nil {
		add("%s: sslrootcert %s is on no volume", sidecarName, ca)
	}
	return out
}

// budgetProblems reports a fleet without a PodDisruptionBudget that selects
// its pods and lets at most one go at a time.
func budgetProblems(m manifests, d *appsv1.Deployment) []string {
	for _, b := range m.budgets {
		if b.Spec.Selector == nil {
			continue
		}
		sel, err := labels.ValidatedSelectorFromSet(b.Spec.Selector.MatchLabels)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		if mu := b.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
			return []string{fmt.Sprintf("the PodDisruptionBudget %s does not set maxUnavailable: 1", b.Name)}
		}
		return nil
	}
	return []string{fmt.Sprintf("no PodDisruptionBudget in %s selects the pods of %s", m.dir, d.Name)}
}

// TestStoreAndProbeChecksCatchBadFleets runs storeProblems and
// probeServiceProblems on variants of the fleet: each bad variant must be
// reported, each good one must pass.
func TestStoreAndProbeChecksCatchBadFleets(t *testing.T) {
	// setEnv replaces (or with nil removes) a variable of the sidecar.
	setEnv := func(c *corev1.Container, name string, e *corev1.EnvVar) {
		env := c.Env[:0]
		for _, old := range c.Env {
			if old.Name != name {
				env = append(env, old)
			}
		}
		if e != nil {
			e.Name = name
			env = append(env, *e)
		}
		c.Env = env
	}
	fromSecret := func(name, key string) *corev1.EnvVar {
		return &corev1.EnvVar{ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: key,
		}}}
	}
	literal := func(v string) *corev1.EnvVar { return &corev1.EnvVar{Value: v} }
	service := func(name string) *string { return &name }
	const pgURL = "postgres://agenthooks@db:5432/agenthooks?sslmode=verify-full"
	cases := []struct {
		name   string
		bad    bool
		change func(m *manifests, d *appsv1.Deployment, c *corev1.Container)
	}{
		{"the manifest as it is", false, func(*manifests, *appsv1.Deployment, *corev1.Container) {}},
		{"a password in args", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			c.Args = []string{"serve", "--db", "postgres://agenthooks:pw@db:5432/agenthooks?sslmode=verify-full"}
		}},
		{"a password in the literal URL", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "AGENTHOOKS_DB", literal("postgres://agenthooks:pw@db:5432/agenthooks?sslmode=verify-full"))
		}},
		{"a literal PGPASSWORD", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "PGPASSWORD", literal("pw"))
		}},
		{"no password at all", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "PGPASSWORD", nil)
		}},
		{"PGPASSWORD from a key the Secret lacks", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "PGPASSWORD", fromSecret("agenthooks-fleet-secrets", "nope"))
		}},
		{"the whole URL from the Secret", false, func(m *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			sec := m.secrets["agenthooks-fleet-secrets"].DeepCopy()
			sec.StringData["database-url"] = "postgres://agenthooks:pw@db:5432/agenthooks?sslmode=verify-full"
			m.secrets["agenthooks-fleet-secrets"] = sec
			setEnv(c, "PGPASSWORD", nil)
			setEnv(c, "AGENTHOOKS_DB", fromSecret("agenthooks-fleet-secrets", "database-url"))
		}},
		{"a URL from a key the Secret lacks", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "AGENTHOOKS_DB", fromSecret("agenthooks-fleet-secrets", "database-url"))
		}},
		{"no TLS", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "AGENTHOOKS_DB", literal("postgres://agenthooks@db:5432/agenthooks"))
		}},
		{"a CA file on no volume", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "AGENTHOOKS_DB", literal(pgURL+"&sslrootcert=/nowhere/ca.pem"))
		}},
		{"three replicas on SQLite", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "AGENTHOOKS_DB", literal("/tmp/agenthooks.db"))
		}},
		{"one replica on SQLite", false, func(_ *manifests, d *appsv1.Deployment, c *corev1.Container) {
			one := int32(1)
			d.Spec.Replicas = &one
			setEnv(c, "AGENTHOOKS_DB", literal("/tmp/agenthooks.db"))
		}},
		{"the image's default store", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			setEnv(c, "AGENTHOOKS_DB", nil)
		}},
		{"liveness on readiness", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			c.LivenessProbe.GRPC.Service = service("readiness")
		}},
		{"liveness on the server's status", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			c.LivenessProbe.GRPC.Service = nil
		}},
		{"startup on readiness", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			c.StartupProbe.GRPC.Service = service("readiness")
		}},
		{"readiness on liveness", true, func(_ *manifests, _ *appsv1.Deployment, c *corev1.Container) {
			c.ReadinessProbe.GRPC.Service = service("liveness")
		}},
	}
	for _, tc := range cases {
		m := load(t, fleetDir)
		d := m.deployments[0].DeepCopy()
		var sidecar *corev1.Container
		for i := range d.Spec.Template.Spec.InitContainers {
			if d.Spec.Template.Spec.InitContainers[i].Name == sidecarName {
				sidecar = &d.Spec.Template.Spec.InitContainers[i]
			}
		}
		if sidecar == nil {
			t.Fatalf("no init container named %s", sidecarName)
		}
		tc.change(&m, d, sidecar)
		problems := append(storeProblems(m, d, sidecar), probeServiceProblems(sidecar)...)
		switch {
		case tc.bad && len(problems) == 0:
			t.Errorf("%s: no problem reported", tc.name)
		case !tc.bad && len(problems) > 0:
			t.Errorf("%s: unexpected problems %q", tc.name, problems)
		}
		t.Logf("%s: %q", tc.name, problems)
	}
}

func TestFleetNeedsADisruptionBudget(t *testing.T) {
	m := load(t, fleetDir)
	d := m.deployments[0]
	if replicas(d) < 2 {
		t.Fatalf("the fleet example runs %d replica(s); it shows several", replicas(d))
	}
	if p := budgetProblems(m, d); len(p) > 0 {
		t.Errorf("%v", p)
	}
	m.budgets = nil
	if p := budgetProblems(m, d); len(p) == 0 {
		t.Error("a fleet without a budget: no problem reported")
	}
}
