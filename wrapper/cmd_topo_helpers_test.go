package main

import "github.com/trainrun/trainrun/topo/snapshot"

func unpackForTest(name, dir string) error { return snapshot.Unpack(name, dir) }
