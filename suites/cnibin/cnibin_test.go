package cnibin

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// staged is a node where staging went right: the image's 14, mode 0755,
// beside a loopback of the node's own.
func staged() (Image, map[string]stager.File) {
	image := Image{"loopback": "image-loopback"}
	files := map[string]stager.File{"loopback": {Name: "loopback", Kind: "file", Perm: 0o755, Hash: "node-loopback"}}
	for _, p := range stager.StagedPlugins {
		image[p] = "image-" + p
		files[p] = stager.File{Name: p, Kind: "file", Perm: 0o755, Hash: "image-" + p}
	}
	return image, files
}

func TestTheImagesFourteenAtMode0755Match(t *testing.T) {
	image, files := staged()
	for _, m := range []*Matcher{HoldTheFourteen(image), HoldTheFourteen(image).AndNothingElseWritten(stager.StagedPlugins)} {
		ok, err := m.Match(files)
		if err != nil || !ok {
			t.Fatalf("a listing holding the image's 14 must match (exact: %v): %v\n%s", m.exact, err, m.FailureMessage(files))
		}
	}
}

func TestEachWayToFailNamesTheFileAndWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name    string
		break_  func(Image, map[string]stager.File)
		matcher func(Image) *Matcher
		want    []string // each in the failure message
	}{
		{
			name:   "a plugin missing",
			break_: func(_ Image, f map[string]stager.File) { delete(f, "bridge") },
			want:   []string{"bridge: absent"},
		},
		{
			name: "a plugin that is not the image's copy",
			break_: func(_ Image, f map[string]stager.File) {
				b := f["vlan"]
				b.Hash, b.Version = "patched", "v1.6.2"
				f["vlan"] = b
			},
			want: []string{"vlan: sha256 patched (v1.6.2 (modified)), the image's copy is image-vlan"},
		},
		{
			name: "a plugin of the wrong mode",
			break_: func(_ Image, f map[string]stager.File) {
				b := f["macvlan"]
				b.Perm = 0o644
				f["macvlan"] = b
			},
			want: []string{"macvlan: mode 0644, not 0755"},
		},
		{
			name: "a directory where a plugin should be",
			break_: func(_ Image, f map[string]stager.File) {
				f["vlan"] = stager.File{Name: "vlan", Kind: "dir", Perm: fs.FileMode(0o755)}
			},
			want: []string{"vlan: a dir, not a regular file"},
		},
		{
			name:   "an image without the plugin",
			break_: func(i Image, _ map[string]stager.File) { delete(i, "tuning") },
			want:   []string{"tuning: the image carries no /cni-plugins/tuning"},
		},
		{
			name: "a name written beyond the 14",
			matcher: func(i Image) *Matcher {
				return HoldTheFourteen(i).AndNothingElseWritten(append(slices.Clone(stager.StagedPlugins), "loopback", "flannel"))
			},
			want: []string{
				"loopback: written, but " + failures.NothingButTheFourteen + "; the image offers it at /cni-plugins/loopback",
				"flannel: written, but " + failures.NothingButTheFourteen + "; the image does not offer it",
			},
		},
		{
			name:    "a plugin the run did not write",
			matcher: func(i Image) *Matcher { return HoldTheFourteen(i).AndNothingElseWritten(stager.StagedPlugins[1:]) },
			want:    []string{stager.StagedPlugins[0] + ": not written by the run"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			image, files := staged()
			if tc.break_ != nil {
				tc.break_(image, files)
			}
			m := HoldTheFourteen(image)
			if tc.matcher != nil {
				m = tc.matcher(image)
			}
			ok, err := m.Match(files)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				t.Fatal("it matched")
			}
			msg := m.FailureMessage(files)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("the failure message must say %q:\n%s", w, msg)
				}
			}
			if n := strings.Count(msg, "\n  "); n != len(tc.want) {
				t.Errorf("%d offending names in the message, want %d:\n%s", n, len(tc.want), msg)
			}
		})
	}
}

// Without AndNothingElseWritten a node's own files are its business.
func TestAtLeastTheFourteenIgnoresTheNodesOtherFiles(t *testing.T) {
	image, files := staged()
	files["flannel"] = stager.File{Name: "flannel", Kind: "file", Perm: 0o700, Hash: "x"}
	if ok, err := HoldTheFourteen(image).Match(files); err != nil || !ok {
		t.Fatalf("the node's flannel must not matter: %v", err)
	}
}

func TestAnythingButAListingIsAnError(t *testing.T) {
	if _, err := HoldTheFourteen(Image{}).Match([]string{"bridge"}); err == nil {
		t.Fatal("a list of names is no directory listing")
	}
}

// A failure's first line says where and what: the judge of a negative
// control shows that line.
func TestTheFirstLineNamesTheDirectoryAndTheRunComesLast(t *testing.T) {
	image, files := staged()
	delete(files, "bridge")
	msg := HoldTheFourteen(image).In("kind-worker:/opt/cni/bin").Showing("exit code 0").FailureMessage(files)
	first, _, _ := strings.Cut(msg, "\n")
	if !strings.HasPrefix(first, "kind-worker:/opt/cni/bin must hold the 14") || !strings.HasSuffix(msg, "\n  bridge: absent\nexit code 0") {
		t.Fatalf("unexpected message:\n%s", msg)
	}
}
