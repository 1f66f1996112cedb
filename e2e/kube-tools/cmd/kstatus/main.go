// Command kstatus prints the kstatus verdict (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, the
// library Flux and kpt use to decide whether an object is reconciled) of Kubernetes objects.
//
// stdin: one or more JSON values, each an object, an array of objects, or a list object ({"items": [...]},
// e.g. the output of `kubectl get -o json`). stdout: one JSON line per object, in input order:
//
//	{"name":"…","namespace":"…","status":"Current|InProgress|Failed|Terminating|NotFound|Unknown","message":"…"}
//
// Bad input (not JSON, an item that is not an object, no object at all, a field kstatus cannot read such as a
// string metadata.generation) prints the reason on stderr, nothing on stdout, and exits with status 1.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: kstatus < objects.json  (stdin: an object, an array of objects, or {\"items\": [...]}; no arguments)")
		os.Exit(2)
	}
	out, err := run(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(out); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: writing stdout: %v\n", err)
		os.Exit(1)
	}
}

// run reads every object first and prints only when all of them were computed, so bad input never leaves a
// partial answer on stdout.
func run(in io.Reader) ([]byte, error) {
	objects, err := readObjects(in)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for i, obj := range objects {
		u := &unstructured.Unstructured{Object: obj}
		res, err := status.Compute(u)
		if err != nil {
			return nil, fmt.Errorf("object %d (%s %s/%s): %w", i, u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		line, err := json.Marshal(verdict{
			Name:      u.GetName(),
			Namespace: u.GetNamespace(),
			Status:    res.Status.String(),
			Message:   res.Message,
		})
		if err != nil {
			return nil, err
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	return out.Bytes(), nil
}

// readObjects decodes every JSON value on in. Numbers become int64 where they are integral (as the API
// machinery's own decoders do): kstatus reads metadata.generation with unstructured.NestedInt64, which refuses
// the float64 a plain encoding/json decode would give.
func readObjects(in io.Reader) ([]map[string]interface{}, error) {
	dec := json.NewDecoder(in)
	dec.UseNumber()
	var objects []map[string]interface{}
	values := 0
	for {
		var v interface{}
		if err := dec.Decode(&v); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("stdin is not JSON: %w", err)
		}
		values++
		if err := utiljson.ConvertInterfaceNumbers(&v, 0); err != nil {
			return nil, fmt.Errorf("JSON value %d: %w", values, err)
		}
		found, err := flatten(v, fmt.Sprintf("JSON value %d", values))
		if err != nil {
			return nil, err
		}
		objects = append(objects, found...)
	}
	if values == 0 {
		return nil, errors.New("stdin holds no JSON value (expected an object, an array of objects, or {\"items\": [...]})")
	}
	return objects, nil
}

func flatten(v interface{}, where string) ([]map[string]interface{}, error) {
	var items []interface{}
	switch v := v.(type) {
	case map[string]interface{}:
		list, isList := v["items"]
		if !isList {
			return []map[string]interface{}{v}, nil
		}
		arr, ok := list.([]interface{})
		if !ok {
			return nil, fmt.Errorf("%s: \"items\" is %T, not an array", where, list)
		}
		items = arr
	case []interface{}:
		items = v
	default:
		return nil, fmt.Errorf("%s is %T, not an object, an array or a list", where, v)
	}
	objects := make([]map[string]interface{}, 0, len(items))
	for i, item := range items {
		obj, ok := item.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("%s, item %d is %T, not an object", where, i, item)
		}
		objects = append(objects, obj)
	}
	return objects, nil
}
