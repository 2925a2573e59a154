// Package skip holds the one way specs turn an observation their platform
// cannot make (platform.ErrNotObservable: a vendor's gateway or switch, an
// existing cluster's nodes) into a skip with the reason, never a failure.
package skip

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"

	"github.com/cozystack/vlan-conformance/framework/platform"
)

// IfNotObservable skips the spec when err says the platform cannot observe
// what it was asked for.
func IfNotObservable(err error) {
	if errors.Is(err, platform.ErrNotObservable) {
		Skip(err.Error())
	}
}
