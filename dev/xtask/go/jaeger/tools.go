//go:build tools

// Package tools pins the Jaeger build into this module's go.sum.
package tools

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
