// Command trainer-v2.3.0 answers admission reviews with Kubeflow Trainer's own webhooks at
// v2.3.0, served by controller-runtime as upstream serves them, the TrainJob validator with the
// runtimes of each case's `state` (a fake client, as upstream's tests build it) and the TrainJob
// defaulter on a fixed clock (2026-01-01T00:00:00Z). The oracle for our Trainer v2.3 rules; not
// part of any build or test run. Build with build.sh.
//
//	trainer-v2.3.0 answer CASE.json...   upstream's decision, warnings and patch for each case
//	trainer-v2.3.0 serve ADDR CA_FILE CASE.json  the webhooks over HTTPS, with that case's state
//	                                     (`cargo xtask bench --peers`)
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	runtimecore "github.com/kubeflow/trainer/v2/pkg/runtime/core"
	testingutil "github.com/kubeflow/trainer/v2/pkg/util/testing"
	"github.com/kubeflow/trainer/v2/pkg/webhooks"
)

type caseFile struct {
	Path   string            `json:"path"`
	State  []json.RawMessage `json:"state"`
	Review json.RawMessage   `json:"review"`
}

type answer struct {
	HTTP     int               `json:"http"`
	Allowed  bool              `json:"allowed"`
	Code     int               `json:"code,omitempty"`
	Reason   string            `json:"reason,omitempty"`
	Message  string            `json:"message,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
	Patch    []json.RawMessage `json:"patch,omitempty"`
	Error    string            `json:"error,omitempty"`
}

func handler(c caseFile) (http.Handler, error) {
	builder := testingutil.NewClientBuilder()
	var objs []client.Object
	for _, raw := range c.State {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &u.Object); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	builder = builder.WithObjects(objs...)
	cl := builder.Build()
	scheme := cl.Scheme()
	switch c.Path {
	case "/mutate-trainer-kubeflow-org-v1alpha1-trainjob":
		clock := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		return admission.WithDefaulter[*trainer.TrainJob](scheme, webhooks.OracleTrainJobDefaulter(clock)), nil
	case "/validate-trainer-kubeflow-org-v1alpha1-trainjob":
		runtimes, err := runtimecore.New(context.Background(), cl, testingutil.AsIndex(builder), nil)
		if err != nil {
			return nil, err
		}
		return admission.WithValidator[*trainer.TrainJob](scheme, webhooks.OracleTrainJobValidator(runtimes)), nil
	case "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime":
		return admission.WithValidator[*trainer.TrainingRuntime](scheme, &webhooks.TrainingRuntimeValidator{}), nil
	case "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime":
		return admission.WithValidator[*trainer.ClusterTrainingRuntime](scheme, &webhooks.ClusterTrainingRuntimeValidator{}), nil
	}
	return nil, fmt.Errorf("no upstream endpoint %s", c.Path)
}

func call(c caseFile) answer {
	h, err := handler(c)
	if err != nil {
		return answer{Error: err.Error()}
	}
	req := httptest.NewRequest("POST", c.Path, bytes.NewReader(c.Review))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var r struct {
		Response struct {
			Allowed  bool     `json:"allowed"`
			Warnings []string `json:"warnings"`
			Patch    string   `json:"patch"`
			Status   *struct {
				Code    int    `json:"code"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &r) != nil {
		return answer{HTTP: w.Code, Error: w.Body.String()}
	}
	a := answer{HTTP: 200, Allowed: r.Response.Allowed, Warnings: r.Response.Warnings}
	if s := r.Response.Status; s != nil {
		a.Code, a.Reason, a.Message = s.Code, s.Reason, s.Message
	}
	if r.Response.Patch != "" {
		raw, _ := base64.StdEncoding.DecodeString(r.Response.Patch)
		_ = json.Unmarshal(raw, &a.Patch)
	}
	return a
}

func main() {
	if len(os.Args) == 5 && os.Args[1] == "serve" {
		raw, err := os.ReadFile(os.Args[4])
		if err != nil {
			fail(err)
		}
		var c caseFile
		if err := json.Unmarshal(raw, &c); err != nil {
			fail(err)
		}
		mux := http.NewServeMux()
		for _, path := range []string{
			"/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
			"/validate-trainer-kubeflow-org-v1alpha1-trainjob",
			"/validate-trainer-kubeflow-org-v1alpha1-trainingruntime",
			"/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime",
		} {
			h, err := handler(caseFile{Path: path, State: c.State})
			if err != nil {
				fail(err)
			}
			mux.Handle(path, h)
		}
		serveTLS(os.Args[2], os.Args[3], mux, false)
	}
	if len(os.Args) < 2 || os.Args[1] != "answer" {
		fmt.Fprintln(os.Stderr, "usage: trainer-v2.3.0 answer CASE.json...")
		os.Exit(2)
	}
	out := map[string]answer{}
	for _, f := range os.Args[2:] {
		raw, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		var c caseFile
		if err := json.Unmarshal(raw, &c); err != nil {
			fmt.Fprintln(os.Stderr, f, err)
			os.Exit(2)
		}
		out[f] = call(c)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	_ = enc.Encode(out)
}
