package labvm

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// KernelInfo describes the cached guest kernel.
type KernelInfo struct{ Package, Release, Vmlinux string }

// guestModules are insmod-ed at boot (dependencies first, resolved from each
// .ko's .modinfo). Optional ones are skipped when the kernel lacks them.
var guestModules = []struct {
	name     string
	required bool
}{
	{"virtio_pci", true}, {"9pnet_virtio", true}, {"9p", true}, {"overlay", false},
	{"8021q", true}, {"bridge", true}, {"macvlan", true}, {"veth", true},
	{"dummy", true}, {"tun", false},
	// The bridge plugin's macspoofchk (VLAN-12): nft in the node's netns.
	// libcrc32c, which nf_tables depends on, names crc32c as a softdep
	// (not followed here): its init fails without the algorithm loaded.
	{"crc32c_generic", false}, {"nf_tables", false},
	// "meta iifname" in the bridge family is nft_meta_bridge's, loaded on
	// demand by modprobe elsewhere (there is none in the lab VM).
	{"nft_meta_bridge", false},
}

// state is CacheDir/kernel.json: what the cache holds, so that later calls
// need neither apt nor the network.
type state struct {
	Package, Release string
	Wanted           string   // guestModules when fetched; a change refetches
	Modules          []string // load order
}

// EnsureKernel fetches and prepares the kernel, modules and initramfs once
// (cached in cfg.CacheDir; a second call does no network I/O).
func EnsureKernel(ctx context.Context, cfg Config) (KernelInfo, error) {
	k, _, err := ensure(ctx, cfg)
	return k, err
}

// ensure returns the kernel and the path of the matching initramfs.
func ensure(ctx context.Context, cfg Config) (KernelInfo, string, error) {
	if !filepath.IsAbs(cfg.CacheDir) {
		return KernelInfo{}, "", fmt.Errorf("labvm: CacheDir %q must be an absolute path", cfg.CacheDir)
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
		return KernelInfo{}, "", err
	}
	// Serialise concurrent callers (e.g. parallel test binaries).
	lock, err := os.OpenFile(filepath.Join(cfg.CacheDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return KernelInfo{}, "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return KernelInfo{}, "", err
	}

	st, err := readState(cfg.CacheDir)
	if err != nil {
		if st, err = fetchKernel(ctx, cfg); err != nil {
			return KernelInfo{}, "", err
		}
	}
	dir := filepath.Join(cfg.CacheDir, st.Release)
	initrd, err := ensureInitramfs(dir, st.Modules)
	if err != nil {
		return KernelInfo{}, "", err
	}
	return KernelInfo{Package: st.Package, Release: st.Release, Vmlinux: filepath.Join(dir, "vmlinux")}, initrd, nil
}

func wantedKey() string {
	var s []string
	for _, m := range guestModules {
		s = append(s, m.name)
	}
	return strings.Join(s, ",")
}

// readState returns the cached state, or an error if anything is missing.
func readState(cacheDir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(cacheDir, "kernel.json"))
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, err
	}
	if st.Wanted != wantedKey() {
		return st, errors.New("module list changed")
	}
	dir := filepath.Join(cacheDir, st.Release)
	files := []string{"vmlinux"}
	for _, m := range st.Modules {
		files = append(files, filepath.Join("modules", m+".ko"))
	}
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return st, err
		}
	}
	return st, nil
}

// need fails with the apt package to install when a host tool is missing.
func need(bin, aptPkg string) error {
	if _, err := exec.LookPath(bin); err != nil {
		return fmt.Errorf("labvm: %s not found: apt-get install %s", bin, aptPkg)
	}
	return nil
}

func run(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("labvm: %s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// resolvePackage names the newest generic kernel package (linux-image-amd64's
// dependency), refreshing apt's lists once if they know none.
func resolvePackage(ctx context.Context) (string, error) {
	for attempt := 0; ; attempt++ {
		out, _ := exec.CommandContext(ctx, "apt-cache", "depends", "linux-image-amd64").Output()
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && strings.HasSuffix(f[0], "Depends:") && strings.HasPrefix(f[1], "linux-image-") {
				return f[1], nil
			}
		}
		if attempt > 0 {
			return "", errors.New("labvm: apt knows no linux-image-amd64 dependency (is this Debian amd64?)")
		}
		if _, err := run(ctx, "", "apt-get", "update"); err != nil {
			return "", err
		}
	}
}

func fetchKernel(ctx context.Context, cfg Config) (state, error) {
	for _, t := range [][2]string{{"apt-get", "apt"}, {"dpkg-deb", "dpkg"}, {"xz", "xz-utils"}} {
		if err := need(t[0], t[1]); err != nil {
			return state{}, err
		}
	}
	pkg, err := resolvePackage(ctx)
	if err != nil {
		return state{}, err
	}
	progress(cfg, "labvm: fetching kernel %s", pkg)
	// Leftovers of an interrupted fetch (we hold the lock, so none is live).
	stale, _ := filepath.Glob(filepath.Join(cfg.CacheDir, "fetch-*"))
	for _, d := range stale {
		os.RemoveAll(d)
	}
	tmp, err := os.MkdirTemp(cfg.CacheDir, "fetch-")
	if err != nil {
		return state{}, err
	}
	defer os.RemoveAll(tmp)
	if _, err := run(ctx, tmp, "apt-get", "download", pkg); err != nil {
		// Stale lists point at a version the mirror dropped: refresh once.
		if _, err := run(ctx, "", "apt-get", "update"); err != nil {
			return state{}, err
		}
		if _, err := run(ctx, tmp, "apt-get", "download", pkg); err != nil {
			return state{}, err
		}
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return state{}, fmt.Errorf("labvm: apt-get download %s left %d .deb files", pkg, len(debs))
	}
	root := filepath.Join(tmp, "x")
	if _, err := run(ctx, "", "dpkg-deb", "-x", debs[0], root); err != nil {
		return state{}, err
	}
	rel := strings.TrimSuffix(strings.TrimPrefix(pkg, "linux-image-"), "-unsigned")
	modDir := ""
	for _, d := range []string{"lib/modules", "usr/lib/modules"} {
		if fi, err := os.Stat(filepath.Join(root, d, rel)); err == nil && fi.IsDir() {
			modDir = filepath.Join(root, d, rel)
		}
	}
	if modDir == "" {
		return state{}, fmt.Errorf("labvm: %s has no modules for release %s", pkg, rel)
	}

	dir := filepath.Join(cfg.CacheDir, rel)
	os.RemoveAll(dir)
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o755); err != nil {
		return state{}, err
	}
	if err := extractVmlinux(ctx, filepath.Join(root, "boot", "vmlinuz-"+rel), filepath.Join(dir, "vmlinux")); err != nil {
		return state{}, err
	}
	order, err := collectModules(ctx, modDir, filepath.Join(dir, "modules"))
	if err != nil {
		return state{}, fmt.Errorf("labvm: %s: %w", pkg, err)
	}
	st := state{Package: pkg, Release: rel, Wanted: wantedKey(), Modules: order}
	b, _ := json.MarshalIndent(st, "", "  ")
	return st, writeAtomic(filepath.Join(cfg.CacheDir, "kernel.json"), b, 0o644)
}

// extractVmlinux unpacks the ELF kernel from the bzImage's XZ payload:
// booting it directly (PVH entry) skips the in-guest decompression, which is
// slow under TCG.
func extractVmlinux(ctx context.Context, vmlinuz, dst string) error {
	data, err := os.ReadFile(vmlinuz)
	if err != nil {
		return err
	}
	i := bytes.Index(data, []byte{0xfd, '7', 'z', 'X', 'Z', 0})
	if i < 0 {
		return fmt.Errorf("labvm: no XZ payload in %s", vmlinuz)
	}
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	cmd := exec.CommandContext(ctx, "xz", "-dc", "--single-stream")
	cmd.Stdin, cmd.Stdout = bytes.NewReader(data[i:]), f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	f.Close()
	if err != nil {
		return fmt.Errorf("labvm: xz -d %s: %v: %s", vmlinuz, err, stderr.Bytes())
	}
	if e, err := elf.Open(tmp); err != nil {
		return fmt.Errorf("labvm: payload of %s is not an ELF kernel: %v", vmlinuz, err)
	} else {
		e.Close()
	}
	return os.Rename(tmp, dst)
}

// collectModules copies the wanted modules and their dependencies, decompressed,
// into dst and returns their load order (dependencies first).
func collectModules(ctx context.Context, modDir, dst string) ([]string, error) {
	norm := func(s string) string { return strings.ReplaceAll(s, "-", "_") }
	files := map[string]string{}
	err := filepath.WalkDir(filepath.Join(modDir, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		for _, ext := range []string{".ko", ".ko.xz"} {
			if strings.HasSuffix(p, ext) {
				files[norm(strings.TrimSuffix(d.Name(), ext))] = p
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(modDir, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[norm(strings.TrimSuffix(filepath.Base(l), ".ko"))] = true
		}
	}

	var order []string
	done := map[string]bool{}
	var add func(name string) error
	add = func(name string) error {
		if done[name] || builtin[name] {
			return nil
		}
		p, ok := files[name]
		if !ok {
			return fmt.Errorf("kernel lacks module %s (neither a .ko nor built in)", name)
		}
		var data []byte
		var err error
		if strings.HasSuffix(p, ".xz") {
			data, err = exec.CommandContext(ctx, "xz", "-dc", p).Output()
		} else {
			data, err = os.ReadFile(p)
		}
		if err != nil {
			return fmt.Errorf("read %s: %v", p, err)
		}
		deps, err := moduleDepends(data)
		if err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		for _, d := range deps {
			if err := add(norm(d)); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dst, name+".ko"), data, 0o644); err != nil {
			return err
		}
		done[name] = true
		order = append(order, name)
		return nil
	}
	for _, m := range guestModules {
		if err := add(m.name); err != nil && m.required {
			return nil, err
		}
	}
	return order, nil
}

// moduleDepends reads "depends=" from a module's .modinfo section.
func moduleDepends(ko []byte) ([]string, error) {
	f, err := elf.NewFile(bytes.NewReader(ko))
	if err != nil {
		return nil, err
	}
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, errors.New("no .modinfo section")
	}
	info, err := sec.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(info, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d != "" {
					deps = append(deps, d)
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// writeAtomic writes via a unique temporary file, so that concurrent writers
// and readers never see a partial file.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), mode)
	}
	if err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
