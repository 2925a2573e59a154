package subject

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/cozystack/vlan-conformance/framework/cozystack"
)

// readGuide reads the guide of --guide (flag), else the release's own, and
// checks that its step 2 NAD and step 3 values are there and that its
// userData can be given each VM's address. A release that ships none,
// with no --guide, leaves Guide nil: no other text is read as its guide.
func (s *Subject) readGuide(flag string) (err error) {
	what := "--cozystack"
	if flag != "" {
		what = "--guide"
		var p string
		if p, err = cozystack.FindGuide(flag); err == nil {
			s.Guide, err = cozystack.ReadGuide(p, cozystack.FromFlag)
		}
	} else if s.Guide, err = s.Release.Guide(); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// Which file a broken block is in: the release's, or the one given.
	defer func() {
		if err != nil {
			err = fmt.Errorf("%s: %s: %w", what, s.Guide.Path, err)
		}
	}()
	if s.nad, err = s.Guide.NAD(); err != nil {
		return err
	}
	if s.vm, err = s.Guide.VMValues(); err != nil {
		return err
	}
	if _, err = s.vm.UserDataAt("192.0.2.1/24"); err != nil {
		return err
	}
	_, s.vlanNIC, err = s.vm.Address()
	return err
}

// NoGuide says why a release's run has no guide, for the report and the ledger.
const NoGuide = "no guide was given (--guide) and the release ships none (" + cozystack.GuidePath + ")"

// ledgerNoGuide lists what the specs apply in the guide's place: the
// suite's own objects, so that no verdict seems to rest on a guide.
func (s *Subject) ledgerNoGuide() {
	why := NoGuide + ": the claims that rest on the guide's words get no verdict; the others are judged on the suite's own objects"
	s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "the guide's step 2 NAD (" + GuideNADFixture + ")", What: "the suite's own fixtures/nad/" + GuideNADFixture + ".json", Why: why})
	s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "the guide's step 3 userData", What: "the suite's own fixtures/cloud-init/vlan100.yaml, at each VM's address", Why: why})
	if s.IaaS != nil {
		s.Ledger.Add(cozystack.Change{Kind: "subject", Object: "every VM", What: "the suite's own VirtualMachine (workload.RenderVM), not " + cozystack.VMInstance + " rendered with the guide's step 3 values", Why: why})
	}
}
