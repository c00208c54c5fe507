//go:build tools

// Package tools pins the kwok build (simulated nodes and kubelets) into this module's go.sum.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
