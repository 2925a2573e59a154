package fabric

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/cozystack/vlan-conformance/framework/dump"
	"github.com/cozystack/vlan-conformance/framework/nsexec"
)

// Prefix starts the name of every namespace and host link the suite makes.
const Prefix = "vcf-"

// NetnsDir is where named network namespaces live (iproute2's convention).
const NetnsDir = "/run/netns"

// Namespace is a named network namespace with a netlink handle into it.
type Namespace struct {
	Name   string
	Path   string
	Handle *netlink.Handle
}

// NewNamespace creates a named network namespace (lo up) without leaving
// the calling thread in it.
func NewNamespace(name string) (*Namespace, error) {
	if !strings.HasPrefix(name, Prefix) {
		name = Prefix + name
	}
	h, err := nsexec.NewNamed(name)
	if err != nil {
		return nil, fmt.Errorf("create netns %s: %w", name, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	ns := &Namespace{Name: name, Path: filepath.Join(NetnsDir, name), Handle: nh}
	lo, err := nh.LinkByName("lo")
	if err == nil {
		err = nh.LinkSetUp(lo)
	}
	if err != nil {
		ns.Delete()
		return nil, fmt.Errorf("netns %s: lo up: %w", name, err)
	}
	return ns, nil
}

// Uncable deletes the links a fabric made in a namespace it does not own
// (the bridge and the uplink), for a run other than the one that made them.
func Uncable(path string) error {
	ns, err := openNamespace("node", path)
	if err != nil {
		return err
	}
	defer ns.Handle.Close()
	return uncable(ns.Handle)
}

// uncable deletes the bridge and the uplink a fabric made in a node
// namespace; the uplink's VLAN sub-interfaces and its gateway peer go with it.
func uncable(h *netlink.Handle) error {
	var errs []error
	for _, name := range []string{BridgeName, UplinkName} {
		if l, err := h.LinkByName(name); err == nil {
			errs = append(errs, h.LinkDel(l))
		}
	}
	return errors.Join(errs...)
}

// openNamespace opens a namespace the fabric does not own.
func openNamespace(name, path string) (*Namespace, error) {
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open netns of %s at %s: %w", name, path, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	return &Namespace{Name: name, Path: path, Handle: nh}, nil
}

// NetSysctl writes one of a namespace's own net sysctls (key under
// /proc/sys/net, e.g. "ipv4/icmp_echo_ignore_all"): read through the
// writing thread's namespace, it never touches the host's.
func NetSysctl(netnsPath, key, value string) error {
	return nsexec.Do(netnsPath, func() error {
		if err := os.WriteFile(filepath.Join("/proc/sys/net", key), []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl net.%s: %w", strings.ReplaceAll(key, "/", "."), err)
		}
		return nil
	})
}

// Delete removes the namespace; its links go with it.
func (n *Namespace) Delete() error {
	if n.Handle != nil {
		n.Handle.Close()
	}
	return DeleteNamespace(n.Name)
}

// DeleteNamespace removes a named namespace; a missing one is not an error.
func DeleteNamespace(name string) error {
	return deleteNamedAt(NetnsDir, name)
}

// deleteNamedAt unmounts and removes dir/name. A run killed between creating
// the file and bind-mounting the namespace onto it leaves a plain file, which
// unmount refuses (EINVAL): it is removed all the same, else every later
// sweep would fail on it (netns.DeleteNamed stops at the unmount).
func deleteNamedAt(dir, name string) error {
	p := filepath.Join(dir, name)
	err := unix.Unmount(p, unix.MNT_DETACH)
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete netns %s: unmount: %w", name, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// Sweep removes every namespace and host link with the suite's prefix: what a
// killed run left. It never touches anything else.
func Sweep() error {
	var errs []error
	entries, err := os.ReadDir(NetnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), Prefix) {
			errs = append(errs, DeleteNamespace(e.Name()))
		}
	}
	links, err := dump.Consistent(netlink.LinkList)
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, Prefix) {
			errs = append(errs, netlink.LinkDel(l))
		}
	}
	return errors.Join(errs...)
}
