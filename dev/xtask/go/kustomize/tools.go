//go:build tools

// Package tools pins the kustomize build into this module's go.sum.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5/commands"
