// Command kthena-v1 answers admission reviews with Kthena's own webhook handlers at v1.0.0, the
// oracle our Kthena v1.0 rules are held to (docs/spec/kthena-v1.md §14). Not part of any build
// or test run: a tool to derive expected answers and to compare ours with upstream's.
//
//	kthena-v1 answer CASE.json...            upstream's HTTP status and body for each case
//	kthena-v1 compare OURS_BINARY CASE.json... differences between upstream and `OURS review`
//	kthena-v1 examples DEFAULTED.json        expected answers for the e2e example test
//	kthena-v1 serve ADDR CA_FILE             the handlers over HTTPS (`cargo xtask bench --peers`)
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"sort"
	"strings"

	autoscaler "github.com/volcano-sh/kthena/pkg/autoscaler/webhook"
	router "github.com/volcano-sh/kthena/pkg/kthena-router/webhook"
	booster "github.com/volcano-sh/kthena/pkg/model-booster-controller/webhook"
	serving "github.com/volcano-sh/kthena/pkg/model-serving-controller/webhook"
)

var handlers = func() map[string]http.HandlerFunc {
	rv := router.NewKthenaRouterValidator(nil, 0)
	return map[string]http.HandlerFunc{
		"/validate/modelbooster":                      booster.NewModelValidator().Handle,
		"/mutate/modelbooster":                        booster.NewModelMutator().Handle,
		"/validate/autoscalingpolicy":                 autoscaler.NewAutoscalingPolicyValidator().Handle,
		"/mutate/autoscalingpolicy":                   autoscaler.NewAutoscalingPolicyMutator().Handle,
		"/validate-workload-ai-v1alpha1-modelserving": serving.NewModelServingValidator().Handle,
		"/validate/modelroute":                        rv.HandleModelRoute,
		"/validate/modelserver":                       rv.HandleModelServer,
	}
}()

// answer is upstream's reply: a panic, a non-200 status, or the decision.
type answer struct {
	Panic   string            `json:"panic,omitempty"`
	Status  int               `json:"status"`
	Body    string            `json:"body,omitempty"`
	Allowed bool              `json:"allowed"`
	Message string            `json:"message,omitempty"`
	Patch   []json.RawMessage `json:"patch,omitempty"`
}

func call(path string, review []byte) (a answer) {
	h, ok := handlers[path]
	if !ok {
		return answer{Status: 404}
	}
	defer func() {
		if p := recover(); p != nil {
			a = answer{Panic: fmt.Sprint(p)}
		}
	}()
	req := httptest.NewRequest("POST", path, bytes.NewReader(review))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h(w, req)
	a.Status = w.Code
	if w.Code != 200 {
		a.Body = w.Body.String()
		return a
	}
	var out struct {
		Response struct {
			Allowed bool   `json:"allowed"`
			Patch   string `json:"patch"`
			Status  *struct {
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		a.Body = err.Error()
		return a
	}
	a.Allowed = out.Response.Allowed
	if out.Response.Status != nil {
		a.Message = out.Response.Status.Message
	}
	if out.Response.Patch != "" {
		raw, _ := base64.StdEncoding.DecodeString(out.Response.Patch)
		_ = json.Unmarshal(raw, &a.Patch)
	}
	return a
}

type caseFile struct {
	Path   string          `json:"path"`
	Review json.RawMessage `json:"review"`
}

func readCase(f string) caseFile {
	raw, err := os.ReadFile(f)
	must(err)
	var c caseFile
	must(json.Unmarshal(raw, &c))
	return c
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// ours runs `<binary> review --path P` and reads its decision the same way.
func ours(binary string, c caseFile) answer {
	cmd := exec.Command(binary, "review", "--path", c.Path)
	cmd.Stdin = bytes.NewReader(c.Review)
	out, err := cmd.Output()
	if err != nil {
		return answer{Status: 400, Body: string(out)}
	}
	var r struct {
		Response struct {
			Allowed bool   `json:"allowed"`
			Patch   string `json:"patch"`
			Status  *struct {
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	must(json.Unmarshal(out, &r))
	a := answer{Status: 200, Allowed: r.Response.Allowed}
	if r.Response.Status != nil {
		a.Message = r.Response.Status.Message
	}
	if r.Response.Patch != "" {
		raw, _ := base64.StdEncoding.DecodeString(r.Response.Patch)
		_ = json.Unmarshal(raw, &a.Patch)
	}
	return a
}

// same: one decision; the same message; the same changes (an empty patch is no patch, and a
// panic or a non-200 is a refusal whatever its text: the API server fails the request either way).
func same(up, us answer) bool {
	upRefused := up.Panic != "" || up.Status != 200
	usRefused := us.Status != 200
	if upRefused || usRefused {
		return (upRefused || !up.Allowed) && (usRefused || !us.Allowed)
	}
	return up.Allowed == us.Allowed && up.Message == us.Message && reflect.DeepEqual(norm(up.Patch), norm(us.Patch))
}

func norm(p []json.RawMessage) []any {
	var out []any
	for _, op := range p {
		var v any
		_ = json.Unmarshal(op, &v)
		out = append(out, v)
	}
	return out
}

// examples turns the e2e test's dump (each example as the API server hands it to webhooks, or the
// API server's own refusal) into upstream's expected answers: mutate where upstream mutates,
// then validate the result.
func examples(dump string) {
	raw, err := os.ReadFile(dump)
	must(err)
	var d map[string]struct {
		Object  map[string]any `json:"object"`
		Refused int            `json:"refused"`
		Message string         `json:"message"`
	}
	must(json.Unmarshal(raw, &d))
	paths := map[string][2]string{
		"ModelBooster":      {"/mutate/modelbooster", "/validate/modelbooster"},
		"AutoscalingPolicy": {"/mutate/autoscalingpolicy", "/validate/autoscalingpolicy"},
		"ModelServing":      {"", "/validate-workload-ai-v1alpha1-modelserving"},
		"ModelRoute":        {"", "/validate/modelroute"},
		"ModelServer":       {"", "/validate/modelserver"},
	}
	out := map[string]map[string]any{}
	for id, ex := range d {
		if ex.Object == nil {
			out[id] = map[string]any{"allowed": false, "message_contains": []string{ex.Message},
				"by": "the API server (schema), before any webhook"}
			continue
		}
		kind, _ := ex.Object["kind"].(string)
		p := paths[kind]
		exp := map[string]any{"allowed": true}
		obj := ex.Object
		if p[0] != "" {
			a := call(p[0], reviewOf(obj))
			if len(a.Patch) > 0 {
				set := map[string]any{}
				for _, op := range norm(a.Patch) {
					m := op.(map[string]any)
					set[m["path"].(string)] = m["value"]
					put(obj, m["path"].(string), m["value"])
				}
				exp["set"] = set
			}
		}
		a := call(p[1], reviewOf(obj))
		switch {
		case a.Panic != "":
			exp = map[string]any{"allowed": false, "message_contains": []string{}, "by": "upstream panics"}
		case a.Status != 200:
			exp = map[string]any{"allowed": false, "message_contains": []string{}, "by": fmt.Sprintf("HTTP %d", a.Status)}
		case !a.Allowed:
			exp = map[string]any{"allowed": false, "message_contains": []string{a.Message}}
		}
		out[id] = exp
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	must(enc.Encode(out))
}

func put(obj map[string]any, pointer string, v any) {
	parts := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	m := obj
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
}

func reviewOf(obj map[string]any) []byte {
	apiVersion, _ := obj["apiVersion"].(string)
	group, version, _ := strings.Cut(apiVersion, "/")
	meta, _ := obj["metadata"].(map[string]any)
	review := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid":       "oracle",
			"kind":      map[string]any{"group": group, "version": version, "kind": obj["kind"]},
			"name":      meta["name"],
			"namespace": meta["namespace"],
			"operation": "CREATE",
			"dryRun":    true,
			"object":    obj,
		},
	}
	raw, err := json.Marshal(review)
	must(err)
	return raw
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kthena-v1 answer|compare|examples …")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "answer":
		out := map[string]answer{}
		for _, f := range os.Args[2:] {
			c := readCase(f)
			out[f] = call(c.Path, c.Review)
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", " ")
		must(enc.Encode(out))
	case "compare":
		files := os.Args[3:]
		sort.Strings(files)
		diffs := 0
		for _, f := range files {
			c := readCase(f)
			if _, ok := handlers[c.Path]; !ok {
				continue
			}
			up, us := call(c.Path, c.Review), ours(os.Args[2], c)
			if !same(up, us) {
				diffs++
				fmt.Printf("DIFF %s\n  upstream: %+v\n  ours:     %+v\n", f, up, us)
			}
		}
		fmt.Printf("%d cases, %d differences\n", len(files), diffs)
		if diffs > 0 {
			os.Exit(1)
		}
	case "examples":
		examples(os.Args[2])
	case "serve":
		mux := http.NewServeMux()
		for path, h := range handlers {
			mux.HandleFunc(path, h)
		}
		serveTLS(os.Args[2], os.Args[3], mux, true)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}
