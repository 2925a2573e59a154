# Conformance suite for KubeVirt VMs on an external VLAN (Cozystack guide).
# `make conformance` runs the lab tier and writes reports/; `make test` is
# what CI runs: unit tests, conformance, negative controls.
SHELL := /bin/bash
GO ?= go
export CGO_ENABLED := 0

# The offline lane's pins (images/versions.env) are the one place versions live.
include images/versions.env
# Build caches live outside the checkout (CI clones afresh): the lab VM's
# kernel and the offline lane's images, each keyed by its inputs.
VCF_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/vlan-conformance
OFFLINE_CACHE := $(VCF_CACHE)/offline
export VCF_CACHE OFFLINE_CACHE
PLUGINS_VERSION ?= $(CNI_PLUGINS_VERSION)
OLD_PLUGINS_VERSION ?= v1.6.2
# The 18 reference plugins of a release (14 staged by multus + loopback dhcp dummy tap).
PLUGINS_MAIN := bridge host-device ipvlan loopback macvlan ptp vlan dummy tap
PLUGINS_IPAM := dhcp host-local static
PLUGINS_META := bandwidth firewall portmap sbr tuning vrf
plugin_pkgs = $(foreach p,$(PLUGINS_MAIN),github.com/containernetworking/plugins/plugins/main/$(p)@$(1)) \
              $(foreach p,$(PLUGINS_IPAM),github.com/containernetworking/plugins/plugins/ipam/$(p)@$(1)) \
              $(foreach p,$(PLUGINS_META),github.com/containernetworking/plugins/plugins/meta/$(p)@$(1))

# The Cozystack release under test (--cozystack): COZYSTACK=DIR, a checkout
# of cozystack/cozystack. By default the verbatim subset of one commit that
# sits beside this checkout (../shared/subjects/cozystack), when it is there;
# `COZYSTACK=` runs the suite's own reference subject instead, and the
# report says that no release was tested.
COZYSTACK ?= $(wildcard ../shared/subjects/cozystack)
# GUIDE=FILE|DIR (--guide): the guide its claims are judged by, e.g. the
# website's page; unset, the release's own docs/vm-external-vlan.md.
GUIDE ?=
RELEASE_ARGS = $(if $(COZYSTACK),--cozystack=$(COZYSTACK)) $(if $(GUIDE),--guide=$(GUIDE))

BIN := bin
SUITE := $(BIN)/suites.test
DRIVER := $(BIN)/conformance
GOFILES := $(shell find . -name '*.go' -not -path './.cache/*' -not -path './bin/*') go.mod go.sum

.PHONY: all build plugins conformance selftest test unit docs netplan-check pinned-image-check bench vet fmt lint clean deps vendor-check cleanup-check soak

all: build

# Installs what a fresh Debian machine lacks (idempotent; root only).
deps:
	scripts/install-deps.sh

plugins: $(BIN)/cni/$(PLUGINS_VERSION)/.done $(BIN)/cni/$(OLD_PLUGINS_VERSION)/.done

$(BIN)/cni/%/.done:
	@echo "building CNI reference plugins $* from the Go module proxy into $(@D)"
	@mkdir -p $(@D)
	GOBIN=$(abspath $(@D)) GOFLAGS=-buildvcs=false $(GO) install -trimpath \
	  -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$*" \
	  $(call plugin_pkgs,$*)
	@touch $@

$(SUITE): $(GOFILES)
	$(GO) test -c -o $@ ./suites

$(DRIVER): $(GOFILES)
	$(GO) build -o $@ ./cmd/conformance

$(BIN)/labvm-smoke: $(GOFILES)
	$(GO) build -o $@ ./cmd/labvm-smoke

build: $(SUITE) $(DRIVER) $(BIN)/labvm-smoke plugins

vet: fmt
	$(GO) vet ./...

# Every shell script CI runs or the image build uses, through shellcheck
# (findings silenced only one by one, each with its reason).
SHELL_SCRIPTS = .ci/run $(shell find images scripts -name '*.sh' -not -path '*/.cache/*')
lint: deps
	shellcheck -x $(SHELL_SCRIPTS)

# gofmt -l lists files whose formatting differs; any is a failure.
fmt:
	@out=$$($$($(GO) env GOROOT)/bin/gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')); \
	if [ -n "$$out" ]; then echo "gofmt -l: not formatted:"; echo "$$out"; exit 1; fi

# Every package's tests but the conformance suite's own entry point (./suites,
# which needs root and a platform: make conformance runs it).
unit:
	$(GO) test $$($(GO) list ./... | grep -v '/suites$$')

# The README's claim table, rendered from framework/claims (the unit tests
# fail while it is stale).
docs:
	$(GO) test ./framework/claims -run TestReadmeClaimTable -update-readme

# native_or_labvm runs $(1) (a path in the checkout, then its arguments)
# here when this kernel has what the lab needs (`conformance preflight`),
# else inside the lab VM with the checkout mounted: the one place that choice
# is written.
native_or_labvm = if $(DRIVER) preflight >/dev/null 2>&1; then $(1); \
	else $(BIN)/labvm-smoke -cache $(VCF_CACHE)/labvm -workdir $(CURDIR) -- $(CURDIR)/$(1); fi

# framework/cloudinit against Debian's real netplan and cloud-init: every
# userData the specs and controls use, rendered by `netplan generate` in a
# cached Debian root (images/guest-debian/netplan-root.sh; root only).
netplan-check:
	root=$$(images/guest-debian/netplan-root.sh | tail -1) && \
	  VCF_NETPLAN_ROOT=$$root VCF_NETPLAN_REQUIRED=1 $(GO) test -count=1 -v -run 'TestNetplanCrossCheck' ./framework/cloudinit

# The release's pinned multus image, offline (issue 35;
# cmd/conformance/pinned_test.go): two images made here from bin/cni, one
# without the Dockerfile's plugin stage (as v1.6.x builds it) and one with
# it, written as a mirror holds them (oci-archive, OCI layout); a copy of
# the release (COZYSTACK) in a temporary directory pinned to each by
# digest; its stager specs run natively (root). STG-01 must fail on the
# image without /cni-plugins with the guide's log line and pass on the
# other; an archive of another digest must exit 2.
pinned-image-check: $(SUITE) $(DRIVER) plugins
	VCF_PINNED_IMAGE=1 VCF_COZYSTACK=$(COZYSTACK) $(GO) test -count=1 -timeout=100m -v -run 'TestPinnedImage' ./cmd/conformance

# The main job: the lab tier (in the lab VM when the kernel lacks 8021q).
conformance: build
	$(DRIVER) run $(RELEASE_ARGS) $(ARGS)

# Negative controls: every control must make its claim's spec FAIL.
selftest: build
	$(DRIVER) selftest $(RELEASE_ARGS) $(ARGS)

bench: build
	$(DRIVER) bench $(ARGS)
	@# The guest's boot to a root shell under QEMU TCG, as its smoke test last measured it.
	@f=$(OFFLINE_CACHE)/work/guest-debian/boot-to-login; \
	  if [ -s "$$f" ]; then echo "boot to a root shell, guest-debian (images/guest-debian/smoke.sh, TCG): $$(cat "$$f") s"; \
	  else echo "boot to a root shell, guest-debian: not measured (run images/guest-debian/build.sh, then images/guest-debian/smoke.sh)"; fi

# Flakes measured: RUNS lab runs in a row, each spec's pass count and wall
# time in reports/soak.md (one run's reports in reports/soak/run-NN).
RUNS ?= 10
soak: build
	$(DRIVER) soak --runs=$(RUNS) $(ARGS)

# Vendor mode against an external gateway the check itself creates (in the
# lab VM when the kernel lacks 8021q).
vendor-check: build
	@$(call native_or_labvm,scripts/vendor-check.sh)

# A SIGINTed run cleans up; a SIGKILLed run's leftovers are swept by the next.
cleanup-check: build
	@$(call native_or_labvm,scripts/cleanup-check.sh)

test: deps lint fmt vet unit netplan-check pinned-image-check cluster-dry-run cluster-cabling conformance selftest vendor-check cleanup-check

clean:
	rm -rf $(BIN) reports/junit.xml reports/*.md reports/*.json reports/artifacts

# ---- The cluster tier (docs/cluster-tier.md) --------------------------------
# kind + Multus + KubeVirt; needs Docker (or --container-runtime) and a
# registry, or --manifests-dir/--images-archive and a local node image for an
# air-gapped run. KIND_ARGS/ARGS pass more flags (see `bin/conformance run -h`).
.PHONY: cluster-dry-run cluster-cabling kind-up kind-down e2e-kind e2e-existing certify bench-cluster selftest-cluster soak-cluster

# The guide's example as --dry-run prints it must match the committed golden
# file (the unit tests check the library's output; this, the driver's).
cluster-dry-run: $(DRIVER)
	$(DRIVER) run --tier=cluster --dry-run | diff -u fixtures/cluster/dry-run.golden -

# Up, run, report, down: the suite makes the cluster in
# SynchronizedBeforeSuite and deletes it at the end (reused and kept if
# `make kind-up` made it; a cluster a killed run left is deleted and made
# afresh); kind's logs land in reports/kind-logs on failure.
# OFFLINE=1: every image built here (`make offline-images`), no registry.
# WORKLOAD=vm: KubeVirt (built here, images/kubevirt) and VMs from the
# offline guest image; WORKLOAD=pod: pods attached by Multus, no KubeVirt.
WORKLOAD ?= pod
ifeq ($(OFFLINE),1)
OFFLINE_IMAGES := $(OFFLINE_CACHE)/images
KUBEVIRT_IMAGES := virt-operator virt-api virt-controller virt-handler virt-launcher \
  virt-exportproxy virt-exportserver virt-synchronization-controller
OFFLINE_ARCHIVES := multus conformance $(if $(filter vm,$(WORKLOAD)),$(KUBEVIRT_IMAGES) guest-debian)
comma := ,
KIND_ARGS += --kind-config=kind-config/offline.yaml --pod-network=ptp \
  --kind-node-image=$(LOCAL_REGISTRY)/node:$(KUBERNETES_VERSION) \
  --images-archive=$(subst $() ,$(comma),$(foreach a,$(OFFLINE_ARCHIVES),$(OFFLINE_IMAGES)/$(a).tar)) \
  --manifests-dir=$(OFFLINE_CACHE)/manifests --multus-version=$(MULTUS_VERSION) \
  --kubevirt-version=$(KUBEVIRT_VERSION) \
  --cni-staging=stager --cni-plugins-image=$(LOCAL_REGISTRY)/multus-cni:$(MULTUS_VERSION) \
  --workload=$(WORKLOAD) --report-dir=reports/cluster-offline
# The VMs boot the Debian guest (images/guest-debian: Debian's cloud-init
# and netplan) with KubeVirt's kernelBoot, its root in the initrd.
OFFLINE_GUEST_ARGS := --guest-image=$(LOCAL_REGISTRY)/guest-debian:$(GUEST_DEBIAN_VERSION) \
  --guest-kernel-boot=/boot/vmlinux:/boot/initrd.img \
  --guest-kernel-args="console=ttyS0 quiet mitigations=off cryptomgr.notests"
ifeq ($(WORKLOAD),vm)
KIND_ARGS += $(OFFLINE_GUEST_ARGS)
endif
E2E_PREP := offline-lane
# Disk a lane takes on the engine's data root at its peak, measured here
# (three nodes' containerd with the archives imported, the VMs' disks):
# the VM lane 8.9 GB, the pod lane 3.4 GB; images/docker/load.sh checks it.
LANE_DISK_GB := $(if $(filter vm,$(WORKLOAD)),9,4)
endif

# Make and cable the cluster and keep it (OFFLINE=1: the engine and images
# first, as for e2e-kind); e2e-kind reuses it and re-cables its nodes.
kind-up: $(DRIVER) plugins $(E2E_PREP)
	$(DRIVER) kind-up --tier=cluster $(KIND_ARGS) $(RELEASE_ARGS)

kind-down: $(DRIVER)
	$(DRIVER) kind-down --tier=cluster $(KIND_ARGS)
# OFFLINE=1 starts a Docker engine (images/docker/engine.sh) when none
# runs; the lane's targets stop it again when they end, with the host
# bridges it made (docker0, br-*), unless KEEP_ENGINE=1 or a cluster still
# runs on it (kind-up's, or --keep-cluster: engine.sh then says what is
# left and how to remove it). An engine the suite did not start is never
# stopped.
ENGINE_STOP := $(if $(filter 1,$(OFFLINE)),$(if $(filter 1,$(KEEP_ENGINE)),echo "engine: left running (KEEP_ENGINE=1): images/docker/engine.sh stop",images/docker/engine.sh stop || true),true)

e2e-kind: $(SUITE) $(DRIVER) plugins $(E2E_PREP)
	$(DRIVER) run --tier=cluster $(KIND_ARGS) $(RELEASE_ARGS) $(ARGS); rc=$$?; $(ENGINE_STOP); exit $$rc

# The same run as e2e-kind, then its milestones from the start of building
# the platform (nodes Ready, Multus, KubeVirt Available, first VMI Ready,
# first login, VM re-creations, the whole run) against the goals, the
# machine's peak memory, every spec's wall time and every VM boot:
# `make bench-cluster OFFLINE=1 WORKLOAD=vm`. Writes bench-cluster.md
# beside the report. Goals are printed, never asserted.
bench-cluster: $(SUITE) $(DRIVER) plugins $(E2E_PREP)
	$(DRIVER) bench --tier=cluster $(KIND_ARGS) $(RELEASE_ARGS) $(ARGS); rc=$$?; $(ENGINE_STOP); exit $$rc

# Flakes measured on the cluster tier: RUNS cluster runs in a row (default
# 3), each spec's pass count and wall time in reports/soak-cluster/soak.md
# (one run's reports in reports/soak-cluster/soak/run-NN). On a cluster
# kept by make kind-up each run reuses it; otherwise each makes its own.
soak-cluster: $(SUITE) $(DRIVER) plugins $(E2E_PREP)
	$(DRIVER) soak --tier=cluster --runs=$(if $(filter command line,$(origin RUNS)),$(RUNS),3) $(KIND_ARGS) $(RELEASE_ARGS) --report-dir=reports/soak-cluster $(ARGS); rc=$$?; $(ENGINE_STOP); exit $$rc

# The negative controls on a cluster: the cluster-only claims' (VLAN-11,
# STG-09, STG-11, STG-12) and, with WORKLOAD=vm, ARP-07's (cluster/vm) and the lab
# controls whose break the cluster applies too (controls.Control.OnVMs:
# `bin/conformance controls` marks them lab+vm). Each is a cluster run of its own, on the cluster make kind-up
# keeps or a fresh one, whose claim's spec must FAIL with the declared
# message; then one run without a control on the same cluster, where
# every one of those claims must pass again:
# `make selftest-cluster OFFLINE=1 WORKLOAD=vm`. reports/cluster-selftest/selftest.md.
selftest-cluster: $(SUITE) $(DRIVER) plugins $(E2E_PREP)
	$(DRIVER) selftest --tier=cluster $(KIND_ARGS) $(RELEASE_ARGS) --report-dir=reports/cluster-selftest $(ARGS); rc=$$?; $(ENGINE_STOP); exit $$rc

# The suite's own image (images/conformance, the driver at /conformance):
# an existing cluster's nodes run it as the node agent
# (--node-agent-image); its reference is in
# $(OFFLINE_CACHE)/images/conformance.ref, its archive beside it. The
# offline lane builds it and kind-up loads it into the nodes.
conformance-image:
	images/conformance/build.sh

.PHONY: offline-images docker-engine offline-lane conformance-image
# Every image of the offline lane from the Go module proxy and Debian
# packages (cached: a second run builds nothing). LANE=vm adds KubeVirt.
# With COZYSTACK the multus image follows the release's Dockerfile. deps
# first: a fresh machine lacks cpio, which packs the guest's initramfs.
offline-images: deps plugins
	COZYSTACK=$(COZYSTACK) images/build.sh $(or $(LANE),$(WORKLOAD))

# A Docker engine: the one running, or Debian's docker.io started with the
# suite's own daemon config (fixes for this host's walls, found by probing).
docker-engine:
	images/docker/engine.sh

# The offline lane's prerequisites: images, an engine, the node image loaded
# (always: an image of the same tag from an older build must not be used),
# its earlier builds removed, and room for a cluster checked.
offline-lane: offline-images docker-engine
	images/docker/load.sh $(OFFLINE_CACHE)/images/node.tar $(LANE_DISK_GB)

e2e-existing: $(SUITE) $(DRIVER)
	@test -n "$(KUBECONFIG)" || { echo "usage: make e2e-existing KUBECONFIG=/path/to/kubeconfig [ARGS='--gateway=... --node-agent-image=...']"; exit 2; }
	$(DRIVER) run --tier=cluster --kubeconfig=$(KUBECONFIG) $(ARGS)

# The suite run inside an existing cluster from its own image (IMAGE, by
# default the one make conformance-image built last): a Job with a
# least-privilege ClusterRole, its results tarball copied out to
# reports/certify and everything it made deleted
# (framework/platform/cluster/suitejob). FOCUS and SKIP are label filters
# (E2E_FOCUS, E2E_SKIP): `make certify KUBECONFIG=... FOCUS='NODE-01 ||
# VLAN-01' ARGS='--gateway=...'`. OFFLINE=1: the VMs boot the offline
# guest image, as the offline lane's do (a cluster make kind-up made).
# COZYSTACK and GUIDE, as for the other targets, are carried into the Job;
# PRODUCT=FILE judges the results by the certification profile.
certify: $(DRIVER)
	@test -n "$(KUBECONFIG)" || { echo "usage: make certify KUBECONFIG=/path/to/kubeconfig [IMAGE=ref] [FOCUS=filter] [SKIP=filter] [OFFLINE=1] [COZYSTACK=dir] [GUIDE=file] [PRODUCT=file] [ARGS='--gateway=... (the run's flags)']"; exit 2; }
	$(DRIVER) certify --kubeconfig=$(KUBECONFIG) --image=$(or $(IMAGE),$$(cat $(OFFLINE_CACHE)/images/conformance.ref)) --focus='$(FOCUS)' --skip='$(SKIP)' $(if $(PRODUCT),--product=$(PRODUCT)) -- $(RELEASE_ARGS) $(if $(filter 1,$(OFFLINE)),$(OFFLINE_GUEST_ARGS)) $(ARGS)

# Cabling kind node containers (stand-ins: processes in netns of their own);
# needs 8021q, so it runs in the lab VM where this kernel lacks it.
cluster-cabling: $(BIN)/labvm-smoke $(DRIVER)
	$(GO) test -c -o $(BIN)/cabling.test ./framework/platform/cluster/cabling
	@$(call native_or_labvm,$(BIN)/cabling.test -test.run TestCablingNodeContainers -test.v)
