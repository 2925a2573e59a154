package stager

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// runtimeDefaultCaps is the capability set containerd and CRI-O give a
// container that neither adds nor drops any.
var runtimeDefaultCaps = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// Security is what the container runs with, resolved from the pod's and the
// container's securityContext over the runtime's defaults.
type Security struct {
	UID, GID int64
	// Caps are the capabilities left (upper case, no CAP_ prefix); nil
	// with Privileged means all of them.
	Caps         []string
	Privileged   bool
	NoNewPrivs   bool
	ReadOnlyRoot bool
	Notes        []string // what had to be assumed
}

// Security resolves the subject's security settings.
func (s InitContainer) Security() (Security, error) {
	sec := Security{}
	c := s.Container.SecurityContext
	if c == nil {
		c = &corev1.SecurityContext{}
	}
	p := s.PodSecurity
	if p == nil {
		p = &corev1.PodSecurityContext{}
	}
	switch {
	case c.RunAsUser != nil:
		sec.UID = *c.RunAsUser
	case p.RunAsUser != nil:
		sec.UID = *p.RunAsUser
	default:
		sec.Notes = append(sec.Notes, "runAsUser unset: the image's user is taken to be root (uid 0)")
	}
	switch {
	case c.RunAsGroup != nil:
		sec.GID = *c.RunAsGroup
	case p.RunAsGroup != nil:
		sec.GID = *p.RunAsGroup
	}
	nonRoot := c.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = p.RunAsNonRoot
	}
	if nonRoot != nil && *nonRoot && sec.UID == 0 {
		return Security{}, fmt.Errorf("%s: runAsNonRoot with uid 0: the kubelet would refuse to start it", InitContainerName)
	}
	sec.Privileged = c.Privileged != nil && *c.Privileged
	if sec.Privileged {
		sec.Notes = append(sec.Notes, "privileged: every capability kept")
	} else {
		caps := map[string]bool{}
		for _, n := range runtimeDefaultCaps {
			caps[n] = true
		}
		if c.Capabilities != nil {
			for _, d := range c.Capabilities.Drop {
				n := capName(string(d))
				if n == "ALL" {
					caps = map[string]bool{}
					continue
				}
				delete(caps, n)
			}
			for _, a := range c.Capabilities.Add {
				caps[capName(string(a))] = true
			}
		}
		sec.Caps = []string{}
		for n := range caps {
			sec.Caps = append(sec.Caps, n)
		}
		sort.Strings(sec.Caps)
	}
	// Kubernetes: privilege escalation is allowed unless set false
	// (privileged or CAP_SYS_ADMIN force it on).
	sec.NoNewPrivs = c.AllowPrivilegeEscalation != nil && !*c.AllowPrivilegeEscalation && !sec.Privileged
	sec.ReadOnlyRoot = c.ReadOnlyRootFilesystem != nil && *c.ReadOnlyRootFilesystem
	return sec, nil
}

func capName(s string) string {
	return strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "CAP_")
}

// setprivArgs is the util-linux setpriv invocation that puts the calling
// root process into sec before it executes argv.
func (sec Security) setprivArgs(argv []string) []string {
	a := []string{
		fmt.Sprintf("--reuid=%d", sec.UID),
		fmt.Sprintf("--regid=%d", sec.GID),
		"--clear-groups",
	}
	if !sec.Privileged {
		set := "-all"
		for _, c := range sec.Caps {
			set += ",+" + strings.ToLower(c)
		}
		a = append(a, "--inh-caps="+set, "--bounding-set="+set)
	}
	if sec.NoNewPrivs {
		a = append(a, "--no-new-privs")
	}
	a = append(a, "--")
	return append(a, argv...)
}

// String describes sec in one line, for reports.
func (sec Security) String() string {
	caps := "all capabilities (privileged)"
	if !sec.Privileged {
		caps = "capabilities: none"
		if len(sec.Caps) > 0 {
			caps = "capabilities: " + strings.Join(sec.Caps, ",")
		}
	}
	return fmt.Sprintf("uid %d gid %d, %s, no_new_privs %v, read-only root %v", sec.UID, sec.GID, caps, sec.NoNewPrivs, sec.ReadOnlyRoot)
}
