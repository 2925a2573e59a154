package main

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Inspect prints every image of a docker-archive: names, config and layers,
// and with files the flattened filesystem. It reads every layer through, so a
// corrupt archive fails here rather than at load time.
func Inspect(path string, files bool, w io.Writer) error {
	opener := func() (io.ReadCloser, error) { return os.Open(path) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return err
	}
	if len(m) == 0 {
		return errors.New("archive holds no image")
	}
	for _, d := range m {
		var tag *name.Tag
		if len(d.RepoTags) > 0 {
			t, err := name.NewTag(d.RepoTags[0])
			if err != nil {
				return err
			}
			tag = &t
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return err
		}
		if err := inspectImage(img, d.RepoTags, files, w); err != nil {
			return err
		}
	}
	return nil
}

func inspectImage(img v1.Image, refs []string, files bool, w io.Writer) error {
	id, err := img.ConfigName()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	c := cf.Config
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	fmt.Fprintf(w, "refs:        %s\n", strings.Join(refs, " "))
	fmt.Fprintf(w, "id:          %s\n", id)
	fmt.Fprintf(w, "platform:    %s/%s\n", cf.OS, cf.Architecture)
	fmt.Fprintf(w, "entrypoint:  %s\n", js(c.Entrypoint))
	fmt.Fprintf(w, "cmd:         %s\n", js(c.Cmd))
	fmt.Fprintf(w, "env:         %s\n", js(c.Env))
	fmt.Fprintf(w, "user:        %q\n", c.User)
	fmt.Fprintf(w, "workdir:     %q\n", c.WorkingDir)
	fmt.Fprintf(w, "stop-signal: %q\n", c.StopSignal)
	if len(c.Labels) > 0 {
		fmt.Fprintf(w, "labels:      %s\n", js(c.Labels))
	}
	if len(c.Volumes) > 0 {
		vs := make([]string, 0, len(c.Volumes))
		for v := range c.Volumes {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		fmt.Fprintf(w, "volumes:     %s\n", js(vs))
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	var total int64
	for i, l := range layers {
		size, err := l.Size()
		if err != nil {
			return err
		}
		diffID, err := l.DiffID()
		if err != nil {
			return err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		total += n
		fmt.Fprintf(w, "layer %d:     %s compressed %d uncompressed %d\n", i, diffID, size, n)
	}
	fmt.Fprintf(w, "total:       %d layers, %d bytes uncompressed\n", len(layers), total)
	if files {
		return listFiles(img, w)
	}
	return nil
}

func listFiles(img v1.Image, w io.Writer) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %04o %d:%d %10d /%s", typeChar(h.Typeflag), h.Mode&0o7777, h.Uid, h.Gid, h.Size, cleanPath(h.Name))
		if h.Linkname != "" {
			line += " -> " + h.Linkname
		}
		fmt.Fprintln(w, line)
	}
}

func typeChar(t byte) string {
	switch t {
	case tar.TypeDir:
		return "d"
	case tar.TypeSymlink:
		return "l"
	case tar.TypeLink:
		return "h"
	case tar.TypeReg:
		return "-"
	}
	return "?"
}
