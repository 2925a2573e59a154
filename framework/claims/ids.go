package claims

import "regexp"

// idRE is how a spec names its claim: the ID in brackets, "[VLAN-03] ...".
var idRE = regexp.MustCompile(`\[((?:VLAN|STG|ARP)-\d\d)\]`)

// IDs lists the claim IDs a spec text names in brackets, in order.
func IDs(text string) []string {
	var ids []string
	for _, m := range idRE.FindAllStringSubmatch(text, -1) {
		ids = append(ids, m[1])
	}
	return ids
}
