// Command layouts prints, as Rust, how Go's encoding/json marshals the types Trainer v2.3.0's
// webhooks decode and re-encode (TrainJob, TrainingRuntime and every type they reach): each
// struct's fields in Go order with their JSON keys and when they are left out. It reads the Go
// types themselves by reflection, so the table is whatever the pinned modules declare.
//
//	cd tools/upstream-oracle/trainer-v2.3.0 && go run ./layouts > ../../../services/training-webhook/src/v2/layouts.rs
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strings"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Types with a marshaller of their own, and the Rust type that stands for each.
var special = map[reflect.Type]string{
	reflect.TypeOf(resource.Quantity{}):  "QTY",
	reflect.TypeOf(metav1.Time{}):        "TIME",
	reflect.TypeOf(intstr.IntOrString{}): "INT_OR_STR",
	reflect.TypeOf(metav1.FieldsV1{}):    "ANY",
}

type gen struct {
	names  map[reflect.Type]string
	queue  []reflect.Type
	out    map[string]string
	failed []string
}

var marshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

func main() {
	g := &gen{names: map[reflect.Type]string{}, out: map[string]string{}}
	roots := map[string]reflect.Type{
		"TRAIN_JOB": reflect.TypeOf(trainer.TrainJob{}),
		"RUNTIME":   reflect.TypeOf(trainer.TrainingRuntime{}),
	}
	var rootNames []string
	for alias, t := range roots {
		rootNames = append(rootNames, fmt.Sprintf("pub use self::%s as %s;", g.ty(t), alias))
	}
	for len(g.queue) > 0 {
		t := g.queue[0]
		g.queue = g.queue[1:]
		g.emit(t)
	}
	if len(g.failed) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(g.failed, "\n"))
		os.Exit(1)
	}
	sort.Strings(rootNames)
	var keys []string
	for k := range g.out {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Printf("//! How Go's encoding/json marshals Trainer v2.3.0's TrainJob and TrainingRuntime and every\n")
	fmt.Printf("//! type they reach: generated from the Go types by `go run ./layouts` in\n")
	fmt.Printf("//! tools/upstream-oracle/trainer-v2.3.0 (%s); do not edit.\n\n", runtime.Version())
	fmt.Printf("#![allow(missing_docs)]\n\n")
	fmt.Printf("use super::Omit::{Empty, Never, Nil, Null};\n")
	fmt.Printf("use super::{ANY, BOOL, Field, INT, INT_OR_STR, QTY, STR, TIME, Ty};\n\n")
	for _, r := range rootNames {
		fmt.Println(r)
	}
	fmt.Println()
	for _, k := range keys {
		fmt.Println(g.out[k])
	}
}

// ty names the Rust static for t, queueing its definition when it is new.
func (g *gen) ty(t reflect.Type) string {
	if s, ok := special[t]; ok {
		return s
	}
	if n, ok := g.names[t]; ok {
		return n
	}
	switch t.Kind() {
	case reflect.Pointer:
		return g.ty(t.Elem())
	case reflect.String:
		return "STR"
	case reflect.Bool:
		return "BOOL"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "INT"
	}
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		g.failed = append(g.failed, fmt.Sprintf("%v marshals itself: say how in `special`", t))
		return "STR"
	}
	var name string
	switch t.Kind() {
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "STR" // []byte: base64 text
		}
		name = "LIST_" + g.ty(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			g.failed = append(g.failed, fmt.Sprintf("%v: a map not keyed by strings", t))
		}
		name = "MAP_" + g.ty(t.Elem())
	case reflect.Struct:
		name = pkgName(t) + "_" + snake(t.Name())
	default:
		g.failed = append(g.failed, fmt.Sprintf("%v: kind %v not laid out", t, t.Kind()))
		return "STR"
	}
	g.names[t] = name
	g.queue = append(g.queue, t)
	return name
}

func (g *gen) emit(t reflect.Type) {
	name := g.names[t]
	switch t.Kind() {
	case reflect.Slice:
		g.out[name] = fmt.Sprintf("pub static %s: Ty = Ty::List(&%s);", name, g.ty(t.Elem()))
	case reflect.Map:
		g.out[name] = fmt.Sprintf("pub static %s: Ty = Ty::Map(&%s);", name, g.ty(t.Elem()))
	case reflect.Struct:
		var b strings.Builder
		fmt.Fprintf(&b, "/// `%s.%s`.\npub static %s: Ty = Ty::Struct(&[\n", t.PkgPath(), t.Name(), name)
		for _, f := range g.fields(t) {
			fmt.Fprintf(&b, "    Field { key: %q, ty: &%s, omit: %s },\n", f.key, f.ty, f.omit)
		}
		b.WriteString("]);")
		g.out[name] = b.String()
	}
}

type field struct{ key, ty, omit string }

// fields lists t's JSON members in Go's order, embedded structs' members in their place.
func (g *gen) fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		key, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && key == "" {
			et := sf.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				out = append(out, g.fields(et)...)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if key == "" {
			key = sf.Name
		}
		omit := "Never"
		has := func(o string) bool { return strings.Contains(","+opts+",", ","+o+",") }
		switch k := sf.Type.Kind(); {
		case has("omitzero"):
			omit = "Nil"
		case !has("omitempty"):
			if k == reflect.Pointer || k == reflect.Interface {
				omit = "Null" // written as null when nil
			}
		case k == reflect.Pointer || k == reflect.Interface:
			omit = "Nil"
		case k == reflect.Struct:
			// omitempty never leaves a struct value out.
		default:
			omit = "Empty"
		}
		out = append(out, field{key, g.ty(sf.Type), omit})
	}
	return out
}

// pkgName: the API group's short name from a package path (`k8s.io/api/core/v1` → CORE).
func pkgName(t reflect.Type) string {
	parts := strings.Split(t.PkgPath(), "/")
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if p == "" || (p[0] == 'v' && len(p) > 1 && p[1] >= '0' && p[1] <= '9') {
			continue
		}
		return strings.ToUpper(strings.ReplaceAll(p, "-", "_"))
	}
	return "GO"
}

func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			prev := rune(s[i-1])
			next := rune(0)
			if i+1 < len(s) {
				next = rune(s[i+1])
			}
			if prev >= 'a' && prev <= 'z' || (next >= 'a' && next <= 'z' && prev >= 'A' && prev <= 'Z') {
				b.WriteByte('_')
			}
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}
