package claims

import "regexp"

// idRE is how a spec names its claim: the ID in brackets, "[VLAN-03] ...".
var idRE = regexp.MustCompile(`\[((?:VLAN|STG|ARP|NODE)-\d\d)\]`)

// IDs lists the claim IDs a spec text names in brackets, in order.
func IDs(text string) []string {
	var ids []string
	for _, m := range idRE.FindAllStringSubmatch(text, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// FirstIDAt is where the first claim ID in text begins (-1: none).
func FirstIDAt(text string) int {
	if i := idRE.FindStringIndex(text); i != nil {
		return i[0]
	}
	return -1
}
