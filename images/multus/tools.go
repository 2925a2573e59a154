//go:build tools

// Package tools pins, for `go mod tidy`, the packages the multus commands
// built by build.sh import: main packages cannot be imported, so without
// this tidy would drop multus and the go.sum lines those builds need.
package tools

import (
	_ "github.com/containernetworking/cni/libcni"
	_ "github.com/containernetworking/cni/pkg/skel"
	_ "github.com/containernetworking/cni/pkg/types/100"
	_ "github.com/containernetworking/cni/pkg/version"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/spf13/pflag"
	_ "golang.org/x/net/netutil"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/cmdutils"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/k8sclient"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/logging"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/server"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/server/api"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/server/config"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/signals"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/types"
	_ "k8s.io/api/certificates/v1"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "k8s.io/client-go/tools/record"
	_ "k8s.io/client-go/util/certificate/csr"
	_ "k8s.io/client-go/util/workqueue"
	_ "k8s.io/klog/v2"
)
