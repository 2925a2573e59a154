module github.com/cozystack/vlan-conformance/images/docker/runc-wrapper

go 1.24
