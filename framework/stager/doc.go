// Package stager runs the multus DaemonSet's init container
// install-cni-plugins (chart value networking.stageCniPlugins) without a
// container runtime, against node directories built to order, and records
// what it did to them (CLAIMS.md, STG-01..08).
//
// The subject is taken from a manifest as written: the init container's
// command and args, its securityContext, its volumeMounts and its
// termination-message settings (manifest.go). Nothing about the script is
// assumed here; the specs hold the guide's promises.
//
// One run (Harness.Stage) happens in a private mount namespace entered by a
// locked OS thread of this process, so every mount it makes dies with that
// thread even if the suite is killed. The subject sees its own root:
//
//	host (the suite, full root)                    private mount namespace of one run
//	───────────────────────────                    ─────────────────────────────────────────
//	<work>/stager-cni-*/<scenario>/                /                  tmpfs; read-only when
//	  root/ ◀── mount point of the "/" tmpfs       │                  readOnlyRootFilesystem
//	  node/opt/cni/bin/ ───────── bind, rw ─────▶  ├── host/opt/cni/bin/  (the volumeMount of
//	    (a small tmpfs of its own                  │                       hostPath /opt/cni/bin)
//	     for the full-file-system fault;           │
//	     a lab node's own directory instead        │
//	     under Harness.Attach)                     ├── cni-plugins/   (absent, or empty, for
//	  image/cni-plugins/ ──────── bind, rw ─────▶  │                   those image variants)
//	    (copies of the image release)              ├── usr/  etc/     read-only binds of the host's
//	  termination-log ─────────── bind, rw ─────▶  ├── dev/termination-log (terminationMessagePath)
//	                                               ├── dev/           tmpfs: null zero full random
//	                                               │                  urandom tty, fd -> /proc/self/fd
//	                                               ├── bin sbin lib lib64 -> usr/...  (usrmerge, as
//	                                               │                  on the host; binds otherwise)
//	                                               ├── proc/          proc
//	                                               └── tmp/ root/ run/ var/
//
//	then: chroot <root>; cd <workingDir or />
//	      setpriv --reuid=U --regid=G --clear-groups --inh-caps=... --bounding-set=...
//	              [--no-new-privs] -- <command...> <args...>
//
// The shell is the host's /bin/sh (dash, as in the multus image) and the
// tools are the host's coreutils. uid, gid, capabilities and no_new_privs
// come from the manifest's securityContext (pod level, then container
// level), over the container runtime's defaults.
//
// Evidence does not rest on inode numbers, which the kernel recycles at
// once: before a run every file of the node directory is opened and held, so
// afterwards the suite can tell whether the name still points at the held
// inode (untouched or rewritten in place) or at another one (replaced), and
// whether the held inode still reads its old bytes (it does after a rename,
// it does not after a copy in place). Content hashes and mtimes complete it.
package stager
