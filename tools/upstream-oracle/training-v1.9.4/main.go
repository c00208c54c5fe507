// Command training-v1.9.4 answers admission reviews with the Training Operator's own v1
// validators at v1.9.4, served by controller-runtime as upstream serves them: the oracle for
// docs/training-webhook.md's "v1.9.0 → v1.9.4". Not part of any build or test run.
//
//	training-v1.9.4 compare OURS_BINARY CASE.json...  differences between upstream and `OURS review`
//	training-v1.9.4 serve ADDR CA_FILE                the validators over HTTPS (`cargo xtask bench --peers`)
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "github.com/kubeflow/training-operator/pkg/apis/kubeflow.org/v1"
	"github.com/kubeflow/training-operator/pkg/webhooks/jax"
	"github.com/kubeflow/training-operator/pkg/webhooks/paddlepaddle"
	"github.com/kubeflow/training-operator/pkg/webhooks/pytorch"
	"github.com/kubeflow/training-operator/pkg/webhooks/tensorflow"
	"github.com/kubeflow/training-operator/pkg/webhooks/xgboost"
)

var handlers = func() map[string]http.Handler {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return map[string]http.Handler{
		"/validate-kubeflow-org-v1-pytorchjob": admission.WithCustomValidator(scheme, &v1.PyTorchJob{}, &pytorch.Webhook{}),
		"/validate-kubeflow-org-v1-tfjob":      admission.WithCustomValidator(scheme, &v1.TFJob{}, &tensorflow.Webhook{}),
		"/validate-kubeflow-org-v1-xgboostjob": admission.WithCustomValidator(scheme, &v1.XGBoostJob{}, &xgboost.Webhook{}),
		"/validate-kubeflow-org-v1-paddlejob":  admission.WithCustomValidator(scheme, &v1.PaddleJob{}, &paddlepaddle.Webhook{}),
		"/validate-kubeflow-org-v1-jaxjob":     admission.WithCustomValidator(scheme, &v1.JAXJob{}, &jax.Webhook{}),
	}
}()

// answer is a decision as the API server reads it.
type answer struct {
	HTTP     int      `json:"http"`
	Allowed  bool     `json:"allowed"`
	Code     int      `json:"code,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Message  string   `json:"message,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

func read(body []byte, status int) answer {
	var r struct {
		Response struct {
			Allowed  bool     `json:"allowed"`
			Warnings []string `json:"warnings"`
			Status   *struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	if status != 200 || json.Unmarshal(body, &r) != nil {
		return answer{HTTP: status}
	}
	a := answer{HTTP: 200, Allowed: r.Response.Allowed, Warnings: r.Response.Warnings}
	if s := r.Response.Status; s != nil {
		a.Code, a.Reason, a.Message = s.Code, s.Reason, s.Message
	}
	return a
}

func upstream(path string, review []byte) answer {
	req := httptest.NewRequest("POST", path, bytes.NewReader(review))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	handlers[path].ServeHTTP(w, req)
	return read(w.Body.Bytes(), w.Code)
}

func ours(binary, path string, review []byte) answer {
	cmd := exec.Command(binary, "review", "--path", path)
	cmd.Stdin = bytes.NewReader(review)
	out, err := cmd.Output()
	if err != nil {
		return answer{HTTP: 400}
	}
	return read(out, 200)
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "serve" {
		mux := http.NewServeMux()
		for path, h := range handlers {
			mux.Handle(path, h)
		}
		serveTLS(os.Args[2], os.Args[3], mux, false)
	}
	if len(os.Args) < 3 || os.Args[1] != "compare" {
		fmt.Fprintln(os.Stderr, "usage: training-v1.9.4 compare OURS_BINARY CASE.json...")
		os.Exit(2)
	}
	files := os.Args[3:]
	sort.Strings(files)
	diffs, n := 0, 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		var c struct {
			Path   string          `json:"path"`
			Review json.RawMessage `json:"review"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			panic(err)
		}
		if _, ok := handlers[c.Path]; !ok {
			continue
		}
		n++
		up, us := upstream(c.Path, c.Review), ours(os.Args[2], c.Path, c.Review)
		same := up.HTTP == us.HTTP && up.Allowed == us.Allowed && up.Code == us.Code && up.Reason == us.Reason && up.Message == us.Message
		if !same {
			diffs++
			u, _ := json.Marshal(up)
			o, _ := json.Marshal(us)
			fmt.Printf("DIFF %s\n  upstream: %s\n  ours:     %s\n", f, u, o)
		}
	}
	fmt.Printf("%d cases, %d differences\n", n, diffs)
	if diffs > 0 {
		os.Exit(1)
	}
}
