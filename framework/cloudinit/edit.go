package cloudinit

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// AddDefaultRoute returns userData with a default route via gw added to
// every ethernet of its netplan files, editing the parsed documents (not
// the text, whose indentation is the author's). Negative controls use it.
func AddDefaultRoute(userData, gw string) (string, error) {
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(userData), &doc); err != nil {
		return "", err
	}
	files, _ := doc["write_files"].([]any)
	edited := 0
	for _, f := range files {
		file, ok := f.(map[string]any)
		if !ok {
			continue
		}
		path, _ := file["path"].(string)
		content, _ := file["content"].(string)
		if !IsNetplanPath(path) {
			continue
		}
		var np map[string]any
		if err := yaml.Unmarshal([]byte(content), &np); err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		network, _ := np["network"].(map[string]any)
		eths, _ := network["ethernets"].(map[string]any)
		for name, e := range eths {
			eth, ok := e.(map[string]any)
			if !ok {
				continue
			}
			routes, _ := eth["routes"].([]any)
			eth["routes"] = append(routes, map[string]any{"to": "default", "via": gw})
			eths[name] = eth
			edited++
		}
		b, err := yaml.Marshal(np)
		if err != nil {
			return "", err
		}
		file["content"] = string(b)
	}
	if edited == 0 {
		return "", fmt.Errorf("no netplan ethernet in the userData to add a route to")
	}
	b, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	return "#cloud-config\n" + string(b), nil
}

// WithConsolePassword appends a password for the image's default user to
// userData, untouched otherwise: the serial console is the suite's only way
// into a VM (the cluster's VMs, the guest's smoke test).
func WithConsolePassword(userData, password string) string {
	if !strings.HasSuffix(userData, "\n") {
		userData += "\n"
	}
	return userData + "# Added by the conformance suite: a password for the serial console.\npassword: " + password + "\nchpasswd:\n  expire: false\n"
}
