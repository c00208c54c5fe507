// Wrapper module that builds tilt from the Go module proxy. Tilt's own replace directives are
// repeated here (a dependency's replaces do not apply to the main module). v0.33.21 is the newest
// release the module proxy serves here.
module admission-webhooks.local/tools/tilt

go 1.24

require github.com/tilt-dev/tilt v0.33.21

replace (
	github.com/emicklei/go-restful/v3 => github.com/emicklei/go-restful/v3 v3.9.0
	github.com/pkg/browser => github.com/tilt-dev/browser v0.0.1
	k8s.io/apimachinery => github.com/tilt-dev/apimachinery v0.31.0-tilt-20240902
)
