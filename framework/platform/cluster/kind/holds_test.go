package kind

import "testing"

// An image whose ID is unknown, or an archive of none, always loads.
func TestHolds(t *testing.T) {
	if holds(nil, map[string]string{"x:1": ""}) {
		t.Error("an image without an ID must always load")
	}
	if holds(nil, nil) {
		t.Error("an archive without images must load (nothing proves the node holds it)")
	}
}
