// Package cni invokes the real upstream CNI plugins through libcni the way
// Multus delegates a NetworkAttachmentDefinition: the NAD's spec.config,
// named after the NAD when it carries no name, turned into a conflist, run
// with the pod's netns, container id, interface name and K8S_* args.
package cni

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// Attachment is one pod interface requested from a NAD.
type Attachment struct {
	NADNamespace, NADName string
	Config                string // spec.config
	PodNamespace, PodName string
	ContainerID           string
	Netns                 string // path
	IfName                string // net1, net2, ... as Multus names them
	MAC                   string // requested MAC ("" = the plugin's choice)
}

// Runtime runs plugins found in BinDirs, caching results in CacheDir (never
// /var/lib/cni).
type Runtime struct {
	BinDirs  []string
	CacheDir string
}

func (r Runtime) confList(a Attachment) (*libcni.NetworkConfigList, error) {
	raw := map[string]any{}
	if err := json.Unmarshal([]byte(a.Config), &raw); err != nil {
		return nil, fmt.Errorf("NAD %s/%s: config is not JSON: %w", a.NADNamespace, a.NADName, err)
	}
	if _, ok := raw["name"]; !ok {
		raw["name"] = a.NADName
	}
	b, _ := json.Marshal(raw)
	if _, isList := raw["plugins"]; isList {
		return libcni.ConfListFromBytes(b)
	}
	conf, err := libcni.ConfFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("NAD %s/%s: %w", a.NADNamespace, a.NADName, err)
	}
	return libcni.ConfListFromConf(conf)
}

func (r Runtime) rt(a Attachment) *libcni.RuntimeConf {
	rt := &libcni.RuntimeConf{
		ContainerID: a.ContainerID,
		NetNS:       a.Netns,
		IfName:      a.IfName,
		Args: [][2]string{
			{"IgnoreUnknown", "true"},
			{"K8S_POD_NAMESPACE", a.PodNamespace},
			{"K8S_POD_NAME", a.PodName},
			{"K8S_POD_INFRA_CONTAINER_ID", a.ContainerID},
		},
	}
	if a.MAC != "" {
		rt.Args = append(rt.Args, [2]string{"MAC", a.MAC})
		rt.CapabilityArgs = map[string]any{"mac": a.MAC}
	}
	return rt
}

// Add runs CNI ADD. The calling goroutine's thread must be in the node's
// network namespace: the plugin is forked from it and finds br100 there.
func (r Runtime) Add(ctx context.Context, a Attachment) (*current.Result, error) {
	list, err := r.confList(a)
	if err != nil {
		return nil, err
	}
	c := libcni.NewCNIConfigWithCacheDir(r.BinDirs, r.CacheDir, nil)
	res, err := c.AddNetworkList(ctx, list, r.rt(a))
	if err != nil {
		return nil, err
	}
	return current.NewResultFromResult(res)
}

// Del runs CNI DEL (same thread rule as Add).
func (r Runtime) Del(ctx context.Context, a Attachment) error {
	list, err := r.confList(a)
	if err != nil {
		return err
	}
	c := libcni.NewCNIConfigWithCacheDir(r.BinDirs, r.CacheDir, nil)
	return c.DelNetworkList(ctx, list, r.rt(a))
}

// IPs lists the addresses of a CNI result.
func IPs(res *current.Result) []netip.Prefix {
	var out []netip.Prefix
	for _, ip := range res.IPs {
		if p, err := netip.ParsePrefix(ip.Address.String()); err == nil {
			out = append(out, p)
		}
	}
	return out
}
