//go:build tools

// Package tools pins tilt for `go build github.com/tilt-dev/tilt/cmd/tilt`.
package tools

import _ "github.com/tilt-dev/tilt/cmd/tilt"
