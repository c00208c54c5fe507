//go:build tools

// Package tools pins the kube-apiserver build into this module's go.sum.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver/app"
