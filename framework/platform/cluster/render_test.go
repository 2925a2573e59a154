package cluster

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/workload"
)

var update = flag.Bool("update", false, "rewrite the golden files under fixtures/cluster")

// golden compares got with fixtures/cluster/<name> (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("..", "..", "..", "fixtures", "cluster", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s ./framework/platform/cluster -update to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Fatalf("%s differs from the rendering; diff it with -update and review:\n--- got\n%s", path, got)
	}
}

// The guide's example: vm-instance values `networks: [{name: vlan100}]`
// and its cloudInit, in tenant-example.
func guideExample() platform.VMSpec {
	return platform.VMSpec{Name: "vm-a", Namespace: "tenant-example", Networks: []string{"vlan100"}, CloudInit: fixtures.CloudInit("203.0.113.10/24")}
}

var testImage = workload.GuestImage{Image: "quay.io/containerdisks/ubuntu:24.04", User: "ubuntu", Password: "vcf-conformance"}

func TestRenderedVMHasTheChartsShape(t *testing.T) {
	r := workload.RenderVM(guideExample(), testImage, "vcf-worker")
	v := r.VM
	if v.Name != "vm-instance-vm-a" || v.Namespace != "tenant-example" {
		t.Fatalf("name %s/%s", v.Namespace, v.Name)
	}
	s := v.Spec.Template.Spec
	ifs := s.Domain.Devices.Interfaces
	if len(ifs) != 2 || ifs[0].Name != "default" || ifs[0].Bridge == nil || ifs[1].Name != "vlan100" || ifs[1].Bridge == nil {
		t.Fatalf("interfaces: want default (bridge), vlan100 (bridge): %+v", ifs)
	}
	if ifs[1].MacAddress != "" {
		t.Fatal("the chart pins no MAC")
	}
	nets := s.Networks
	if len(nets) != 2 || nets[0].Name != "default" || nets[0].Pod == nil || nets[1].Name != "vlan100" || nets[1].Multus == nil || nets[1].Multus.NetworkName != "tenant-example/vlan100" {
		t.Fatalf("networks: want default (pod), vlan100 (multus tenant-example/vlan100): %+v", nets)
	}
	var ci int
	for _, vol := range s.Volumes {
		if vol.CloudInitNoCloud != nil {
			ci++
			if vol.Name != "cloudinitdisk" || vol.CloudInitNoCloud.UserDataSecretRef == nil || vol.CloudInitNoCloud.UserDataSecretRef.Name != "vm-instance-vm-a-cloud-init" ||
				vol.CloudInitNoCloud.UserData != "" || vol.CloudInitNoCloud.NetworkData != "" || vol.CloudInitNoCloud.NetworkDataSecretRef != nil {
				t.Fatalf("cloud-init: userData from the Secret only: %+v", vol)
			}
		}
	}
	if ci != 1 {
		t.Fatalf("want one cloudInitNoCloud volume, got %d", ci)
	}
	if r.Secret.Name != "vm-instance-vm-a-cloud-init" || len(r.Secret.StringData) != 1 {
		t.Fatalf("secret %s: %v", r.Secret.Name, r.Secret.StringData)
	}
	ud := r.Secret.StringData["userdata"]
	if !strings.HasPrefix(ud, fixtures.CloudInit("203.0.113.10/24")) {
		t.Fatalf("the userData must start with the guide's, verbatim:\n%s", ud)
	}
	if !strings.Contains(ud, "path: /etc/netplan/60-vlan100.yaml") || !strings.Contains(ud, "- 203.0.113.10/24") || !strings.Contains(ud, "netplan apply") {
		t.Fatalf("the guide's netplan file is missing:\n%s", ud)
	}
	// Re-created from the same spec: the same objects, so only KubeVirt's
	// MAC allocation can differ (ARP-01).
	again := workload.RenderVM(guideExample(), testImage, "vcf-worker")
	a, _ := kube.ToYAML(r.VM)
	b, _ := kube.ToYAML(again.VM)
	if a != b {
		t.Fatal("rendering must be deterministic")
	}
}

func TestPinnedMAC(t *testing.T) {
	spec := guideExample()
	spec.MAC = "02:00:00:00:00:0a"
	ifs := workload.RenderVM(spec, testImage, "").VM.Spec.Template.Spec.Domain.Devices.Interfaces
	if ifs[1].MacAddress != spec.MAC || ifs[0].MacAddress != "" {
		t.Fatalf("the pinned MAC goes on the VLAN interface only: %+v", ifs)
	}
}

func TestGuideObjectsGolden(t *testing.T) {
	r := workload.RenderVM(guideExample(), testImage, "vcf-worker")
	var b strings.Builder
	for _, o := range []any{kube.RenderNamespace("tenant-example"), kube.RenderNAD("tenant-example", platform.NAD{Name: "vlan100", Config: fixtures.NAD("vlan100-bridge")}), r.Secret, r.VM} {
		y, err := kube.ToYAML(o)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n" + y)
	}
	golden(t, "guide-example.yaml", b.String())
}

// A kernel-boot guest image (the offline lane's) is booted with KubeVirt's
// kernelBoot from that image, with no system disk; the firmware UUID the
// chart derives stays.
func TestRenderedKernelBootGuest(t *testing.T) {
	img := workload.GuestImage{Image: "localhost/vcf/guest-debian:0.1.0", User: "ubuntu", Password: "p",
		KernelBoot: "/boot/vmlinux:/boot/initrd.img", KernelArgs: "console=ttyS0"}
	s := workload.RenderVM(guideExample(), img, "vcf-worker").VM.Spec.Template.Spec
	fw := s.Domain.Firmware
	if fw == nil || fw.UUID == "" || fw.KernelBoot == nil || fw.KernelBoot.Container == nil {
		t.Fatalf("firmware: want a UUID and a kernelBoot container: %+v", fw)
	}
	c := fw.KernelBoot.Container
	if c.Image != img.Image || c.KernelPath != "/boot/vmlinux" || c.InitrdPath != "/boot/initrd.img" || fw.KernelBoot.KernelArgs != "console=ttyS0" {
		t.Fatalf("kernelBoot: %+v args %q", c, fw.KernelBoot.KernelArgs)
	}
	for _, vol := range s.Volumes {
		if vol.ContainerDisk != nil {
			t.Fatalf("a kernel-boot guest has no containerDisk: %+v", vol)
		}
	}
}
