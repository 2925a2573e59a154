package cluster

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

func skipIfNotObservable(err error) {
	if errors.Is(err, platform.ErrNotObservable) {
		Skip(err.Error())
	}
}
