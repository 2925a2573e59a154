package multus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cozystack/vlan-conformance/framework/atomicfile"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/stager"
)

// stagerInit takes the install-cni-plugins init container from the stager
// manifest (--stager-manifest) with the image given for it, mounting the
// node's /opt/cni/bin as the manifest does.
func stagerInit(manifest []byte, image string) (corev1.Container, string, error) {
	objs, err := kube.Decode(manifest)
	if err != nil {
		return corev1.Container{}, "", err
	}
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			return corev1.Container{}, "", err
		}
		for _, c := range ds.Spec.Template.Spec.InitContainers {
			if c.Name != stager.InitContainerName {
				continue
			}
			for _, vm := range c.VolumeMounts {
				for _, v := range ds.Spec.Template.Spec.Volumes {
					if v.Name == vm.Name && v.HostPath != nil && filepath.Clean(v.HostPath.Path) == "/opt/cni/bin" {
						if image != "" {
							c.Image = image
						}
						return c, vm.Name, nil
					}
				}
			}
			return corev1.Container{}, "", fmt.Errorf("stager manifest: %s mounts no hostPath /opt/cni/bin", stager.InitContainerName)
		}
	}
	return corev1.Container{}, "", fmt.Errorf("stager manifest: no DaemonSet with an init container %s (staging is off in that render)", stager.InitContainerName)
}

// withStaging renders the Multus DaemonSet as the chart does with
// networking.stageCniPlugins on (the stager's init container first, mounting
// the node's /opt/cni/bin) or off (no such init container). rev, if set,
// annotates the pod template so that the DaemonSet rolls.
func withStaging(objs []*unstructured.Unstructured, ic *corev1.Container, stagerVolume, rev string) error {
	for _, o := range objs {
		if o.GetKind() != "DaemonSet" || !strings.Contains(o.GetName(), "multus") {
			continue
		}
		var ds appsv1.DaemonSet
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ds); err != nil {
			return err
		}
		spec := &ds.Spec.Template.Spec
		var inits []corev1.Container
		for _, c := range spec.InitContainers {
			if c.Name != stager.InitContainerName {
				inits = append(inits, c)
			}
		}
		if ic != nil {
			c := *ic
			vol := cniBinVolume(spec)
			if vol == "" {
				vol = stagerVolume
				spec.Volumes = append(spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/opt/cni/bin"}}})
			}
			for i := range c.VolumeMounts {
				if c.VolumeMounts[i].Name == stagerVolume {
					c.VolumeMounts[i].Name = vol
				}
			}
			inits = append([]corev1.Container{c}, inits...)
		}
		spec.InitContainers = inits
		if rev != "" {
			if ds.Spec.Template.Annotations == nil {
				ds.Spec.Template.Annotations = map[string]string{}
			}
			ds.Spec.Template.Annotations["vlan-conformance.cozystack.io/staging"] = rev
		}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ds)
		if err != nil {
			return err
		}
		o.Object = m
		return nil
	}
	return errors.New("no Multus DaemonSet in the manifest")
}

func cniBinVolume(spec *corev1.PodSpec) string {
	for _, v := range spec.Volumes {
		if v.HostPath != nil && filepath.Clean(v.HostPath.Path) == "/opt/cni/bin" {
			return v.Name
		}
	}
	return ""
}

// installPlugins is the plain installer: every file of src written next to
// its place in dst, then renamed over it.
func installPlugins(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		f, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		err = atomicfile.Write(filepath.Join(dst, e.Name()), f, 0o755)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
