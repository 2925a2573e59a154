package image

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Mirror is one --registry-mirror=HOST=MIRROR: images the release pins on
// HOST are pulled from MIRROR instead (a host[:port], optionally with a
// path prefix), by the same repository path and the pin's digest, as
// air-gapped mirrors keep them. "http://" before MIRROR pulls over plain
// HTTP; ggcr already does so for localhost and loopback addresses.
type Mirror struct {
	Host     string // as the pin names it, normalised (docker.io is index.docker.io)
	To       string // host[:port][/prefix]
	Insecure bool
	Flag     string // as given, for messages
}

// ParseMirror reads HOST=MIRROR.
func ParseMirror(s string) (Mirror, error) {
	host, to, ok := strings.Cut(s, "=")
	if !ok || host == "" || to == "" {
		return Mirror{}, fmt.Errorf("%q: want HOST=MIRROR, e.g. ghcr.io=localhost:5000", s)
	}
	m := Mirror{Flag: s}
	if rest, ok := strings.CutPrefix(to, "http://"); ok {
		to, m.Insecure = rest, true
	} else if strings.Contains(to, "://") {
		return Mirror{}, fmt.Errorf("%q: MIRROR is host[:port][/prefix], or http://host[:port][/prefix] for plain HTTP", s)
	}
	to = strings.TrimSuffix(to, "/")
	r, err := name.NewRegistry(host, name.StrictValidation)
	if err != nil {
		return Mirror{}, fmt.Errorf("%q: HOST %q: %w", s, host, err)
	}
	// A repository of the mirror must parse, else every pull would fail.
	if _, err := name.NewRepository(to+"/probe", name.StrictValidation); err != nil {
		return Mirror{}, fmt.Errorf("%q: MIRROR %q is not host[:port][/prefix]", s, to)
	}
	m.Host, m.To = r.RegistryStr(), to
	return m, nil
}

// PullRef is where ref (name:tag@digest) is pulled from: the first mirror
// of its registry, else ref's own registry; m is that mirror, nil for none.
func PullRef(ref string, mirrors []Mirror) (name.Digest, *Mirror, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return name.Digest{}, nil, fmt.Errorf("the release pins %s by no digest: nothing to pull it by", ref)
	}
	for i, m := range mirrors {
		if m.Host != d.RegistryStr() {
			continue
		}
		var opts []name.Option
		if m.Insecure {
			opts = append(opts, name.Insecure)
		}
		md, err := name.NewDigest(m.To+"/"+d.RepositoryStr()+"@"+d.DigestStr(), opts...)
		if err != nil {
			return name.Digest{}, nil, fmt.Errorf("%s on the mirror %s: %w", ref, m.Flag, err)
		}
		return md, &mirrors[i], nil
	}
	return d, nil, nil
}

// pulledFrom is the file in a pulled layout naming the reference it was
// pulled from, so that a later run reusing it can say so.
const pulledFrom = "vcf-pulled-from"

// Pull pulls the image ref pins by its digest (from its mirror among
// mirrors, when there is one) into the OCI layout cache/<algorithm>-<hex>,
// and reads it back as an --image-archive is read (ReadArchive, Pin). A
// pin is immutable: a layout already there is reused without the network.
// Of a multi-platform index only this machine's platform image is kept,
// beside the index itself, as a one-platform mirror keeps it.
func Pull(ref string, mirrors []Mirror, cache string) (*Pinned, error) {
	from, m, err := PullRef(ref, mirrors)
	if err != nil {
		return nil, err
	}
	// What the image was pulled from, and how errors name it.
	source, via := from.String()+", the pin's own registry", fmt.Sprintf(" (no --registry-mirror of %s)", from.RegistryStr())
	if m != nil {
		source = fmt.Sprintf("%s (--registry-mirror %s)", from, m.Flag)
		via = " from " + source
	}
	dir := filepath.Join(cache, strings.Replace(from.DigestStr(), ":", "-", 1))
	if p, err := readPulled(dir, ref); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(cache, ".pull-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if err := pullInto(tmp, ref, from); err != nil {
		return nil, fmt.Errorf("pulling %s%s: %w", ref, via, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, pulledFrom), []byte(source+"\n"), 0o644); err != nil {
		return nil, err
	}
	os.RemoveAll(dir) // a layout that did not read back (readPulled)
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	p, err := readPulled(dir, ref)
	if err != nil {
		return nil, fmt.Errorf("pulled %s%s: %w", ref, via, err)
	}
	return p, nil
}

// readPulled reads the layout dir as an --image-archive is read and checks
// that it holds the image ref pins.
func readPulled(dir, ref string) (*Pinned, error) {
	a, err := ReadArchive(dir)
	if err != nil {
		return nil, err
	}
	p, err := a.Pin(ref)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, pulledFrom))
	if err != nil {
		return nil, err
	}
	p.Pulled = strings.TrimSpace(string(b))
	return p, nil
}

// pullInto writes the manifest or index d names into a new OCI layout at
// dir. ggcr checks every manifest and blob it fetches against its digest;
// the digest served is checked against the pin once more, so that a
// mismatch names both.
func pullInto(dir, ref string, d name.Digest) error {
	desc, err := remote.Get(d, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return explainMissing(ref, d, err)
	}
	if got := desc.Digest.String(); got != d.DigestStr() {
		return fmt.Errorf("the registry served %s, not the pin's %s", got, d.DigestStr())
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if !desc.MediaType.IsIndex() {
		img, err := desc.Image()
		if err != nil {
			return err
		}
		return lp.AppendImage(img)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return err
	}
	child, err := platformChild(idx)
	if err != nil {
		return fmt.Errorf("the index: %w", err)
	}
	img, err := idx.Image(child)
	if err != nil {
		return err
	}
	if err := lp.WriteImage(img); err != nil {
		return err
	}
	if err := lp.WriteBlob(desc.Digest, io.NopCloser(bytes.NewReader(desc.Manifest))); err != nil {
		return err
	}
	return lp.AppendDescriptor(desc.Descriptor)
}

// explainMissing adds, to a pull by digest the registry does not know,
// what the pin's tag names there instead: the mirror holds another build.
func explainMissing(ref string, d name.Digest, err error) error {
	var te *transport.Error
	tag := tagOf(ref)
	if !errors.As(err, &te) || te.StatusCode != http.StatusNotFound || tag == "" {
		return err
	}
	t := d.Context().Tag(tag)
	got, herr := remote.Head(t, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if herr != nil {
		return fmt.Errorf("%w; the registry has no manifest of the pin's digest %s, nor a tag %s", err, d.DigestStr(), tag)
	}
	return fmt.Errorf("%w; the registry has no manifest of the pin's digest %s: its tag %s names %s, another image", err, d.DigestStr(), tag, got.Digest)
}

// tagOf is the tag of name:tag@digest, "" when it names none.
func tagOf(ref string) string {
	base, _, _ := strings.Cut(ref, "@")
	slash := strings.LastIndex(base, "/")
	if colon := strings.LastIndex(base, ":"); colon > slash {
		return base[colon+1:]
	}
	return ""
}
