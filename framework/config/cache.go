package config

import (
	"os"
	"path/filepath"
)

// CacheRoot is where build caches live (the lab VM's kernel, the offline
// lane's images): outside the checkout, because CI clones afresh and a
// machine that built them once should not build them again. $VCF_CACHE
// wins, as in the Makefile and images/env.sh.
func CacheRoot() string {
	if d := os.Getenv("VCF_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "vlan-conformance")
	}
	return filepath.Join(os.TempDir(), "vlan-conformance-cache")
}
