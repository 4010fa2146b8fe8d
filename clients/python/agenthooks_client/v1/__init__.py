"""Messages and stubs of the proto package agenthooks.v1. Generated; DO NOT EDIT."""
