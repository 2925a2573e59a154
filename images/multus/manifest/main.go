// Command manifest rewrites a Multus release manifest for the offline lane:
// every container image of every pod template becomes -image, pulled only
// when the node does not have it (the images are preloaded, never pulled).
//
//	manifest -in multus-daemonset-thick.yml -out OUT -image REF [-source TEXT]
//
// Documents keep their order; comments are dropped (a header says where the
// file came from instead).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Lists of containers in a pod spec whose images are rewritten.
var containerLists = []string{"initContainers", "containers", "ephemeralContainers"}

func main() {
	in := flag.String("in", "", "release manifest to read")
	out := flag.String("out", "", "manifest to write")
	image := flag.String("image", "", "image every container gets")
	source := flag.String("source", "", "where the input came from, for the header")
	flag.Parse()
	if *in == "" || *out == "" || *image == "" {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*in, *out, *image, *source); err != nil {
		fmt.Fprintln(os.Stderr, "manifest:", err)
		os.Exit(1)
	}
}

func run(in, out, image, source string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	docs, err := splitDocs(b)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if source == "" {
		source = in
	}
	fmt.Fprintf(&buf, "# Generated from %s: every container image set to %s, imagePullPolicy IfNotPresent.\n", source, image)
	n := 0
	for _, d := range docs {
		var obj map[string]any
		if err := yaml.Unmarshal(d, &obj); err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		if len(obj) == 0 {
			continue // only comments
		}
		n += rewrite(obj, image)
		y, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		buf.WriteString("---\n")
		buf.Write(y)
	}
	if n == 0 {
		return fmt.Errorf("%s: no container image found to rewrite", in)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "manifest: %d container images -> %s\n", n, image)
	return os.Rename(tmp, out)
}

// splitDocs splits a YAML stream at its "---" document markers (a marker
// line at column 0 always starts a document, even after a block scalar).
func splitDocs(b []byte) ([][]byte, error) {
	var docs [][]byte
	var cur bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "---" || strings.HasPrefix(line, "--- ") || strings.HasPrefix(line, "---\t") {
			if rest := strings.TrimSpace(line[3:]); rest != "" && !strings.HasPrefix(rest, "#") {
				return nil, fmt.Errorf("document marker with content %q is not supported", line)
			}
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	docs = append(docs, cur.Bytes())
	return docs, sc.Err()
}

// rewrite walks the object and sets image and imagePullPolicy of every
// container in a container list; it returns how many it changed.
func rewrite(v any, image string) int {
	n := 0
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if isContainerList(k) {
				if cs, ok := sub.([]any); ok {
					for _, c := range cs {
						if cm, ok := c.(map[string]any); ok {
							if _, has := cm["image"]; has {
								cm["image"] = image
								cm["imagePullPolicy"] = "IfNotPresent"
								n++
							}
						}
					}
				}
				continue
			}
			n += rewrite(sub, image)
		}
	case []any:
		for _, sub := range t {
			n += rewrite(sub, image)
		}
	}
	return n
}

func isContainerList(k string) bool {
	for _, l := range containerLists {
		if k == l {
			return true
		}
	}
	return false
}
