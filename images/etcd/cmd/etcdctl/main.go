// Command etcdctl is etcd's client CLI (the same call as etcdctl's own main
// package), shipped in the image for debugging as upstream's image does.
package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() {
	ctlv3.MustStart()
}
