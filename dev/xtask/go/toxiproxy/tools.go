//go:build tools

// Package tools pins the toxiproxy server build into this module's go.sum.
package tools

import _ "github.com/Shopify/toxiproxy/v2"
