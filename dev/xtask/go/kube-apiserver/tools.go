//go:build tools

// Package tools pins the builds of kube-apiserver, kube-controller-manager, kube-scheduler and
// kubectl (one Kubernetes module, one go.sum) into this module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubectl/pkg/cmd"
)
