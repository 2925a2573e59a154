package cabling

import "github.com/vishvananda/netns"

type netnsHandle = netns.NsHandle

func openNS(path string) (netns.NsHandle, error) { return netns.GetFromPath(path) }
