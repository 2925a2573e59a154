package kube

import (
	"encoding/json"

	"sigs.k8s.io/yaml"
)

// ToYAML prints an object as `kubectl get -o yaml` would show what was
// applied: no creationTimestamp: null, no empty status.
func ToYAML(obj any) (string, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return "", err
	}
	prune(m)
	out, err := yaml.Marshal(m)
	return string(out), err
}

func prune(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			if k == "creationTimestamp" {
				delete(m, k)
			}
		case map[string]any:
			prune(v)
			if len(v) == 0 && k == "status" {
				delete(m, k)
			}
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					prune(em)
				}
			}
		}
	}
}
