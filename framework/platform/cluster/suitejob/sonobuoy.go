package suitejob

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// SonobuoyResults is where Sonobuoy has a plugin write its results
// ($SONOBUOY_RESULTS_DIR, set by Sonobuoy; this is its default).
const SonobuoyResults = "/tmp/sonobuoy/results"

// sonobuoyPlugin is a Sonobuoy plugin definition as `sonobuoy run
// --plugin FILE` reads it (Sonobuoy's manifest.Manifest, by its JSON
// names: the suite does not import Sonobuoy).
type sonobuoyPlugin struct {
	Config struct {
		Driver       string   `json:"driver"`
		PluginName   string   `json:"plugin-name"`
		ResultFormat string   `json:"result-format"`
		ResultFiles  []string `json:"result-files,omitempty"`
		Description  string   `json:"description,omitempty"`
	} `json:"sonobuoy-config"`
	Spec         corev1.Container `json:"spec"`
	ExtraVolumes []corev1.Volume  `json:"extra-volumes,omitempty"`
}

// SonobuoyPlugin is the same run as a Sonobuoy Job plugin: the Job's
// container as it is, but that it exits once its results are written
// (Sonobuoy's worker collects them from $SONOBUOY_RESULTS_DIR by done),
// and that it runs as Sonobuoy's service account, not the ClusterRole
// certify makes. Sonobuoy reads the JUnit report in the tarball.
func SonobuoyPlugin(o Options) ([]byte, error) {
	if o.Inputs != nil {
		return nil, errors.New("a Sonobuoy plugin carries no files of this machine (--cozystack, --guide): run certify")
	}
	o.Hold = 0
	pod := Render(o).Job.Spec.Template.Spec
	var p sonobuoyPlugin
	p.Config.Driver = "Job"
	p.Config.PluginName = "vlan-conformance"
	p.Config.ResultFormat = "junit"
	p.Config.ResultFiles = []string{"junit.xml"}
	p.Config.Description = "KubeVirt VMs on an external VLAN on Cozystack: the claims of the vlan-conformance suite"
	p.Spec = pod.Containers[0]
	p.Spec.Name = "plugin"
	// Sonobuoy makes the pod: the pod's security context goes on the
	// container, and the results volume Sonobuoy provides is mounted
	// where it reads them.
	sc := *p.Spec.SecurityContext
	sc.RunAsNonRoot, sc.RunAsUser, sc.RunAsGroup, sc.SeccompProfile = pod.SecurityContext.RunAsNonRoot, pod.SecurityContext.RunAsUser, pod.SecurityContext.RunAsGroup, pod.SecurityContext.SeccompProfile
	p.Spec.SecurityContext = &sc
	p.Spec.VolumeMounts = append(p.Spec.VolumeMounts, corev1.VolumeMount{Name: "results", MountPath: SonobuoyResults})
	p.ExtraVolumes = pod.Volumes
	return yaml.Marshal(p)
}
