package policy

import (
	"slices"
	"strings"
)

// containerKeys are the keys of containers and of srun's options: the
// image a job runs in when the user names none, where images may come from,
// the mounts every job gets, and srun options the site adds to every step
// (trainrun run checks each against the options it sets itself).
func containerKeys() []*Key {
	return []*Key{
		{Name: "SrunArgs", Default: "none", Repeat: true, User: true,
			Format: "one srun option per SrunArgs= (repeat the key), e.g. --mpi=pmix; none clears the site's list on a partition line",
			Why:    "none: trainrun's step uses srun's defaults; a site adds what its fabric needs (--mpi, --network); users add theirs with --srun-arg where UserOverride allows SrunArgs",
			parse:  parseListItem, set: func(s *Settings, v any, src Source) { appendItem(&s.SrunArgs, v.(listItem), src) }},
		{Name: "ContainerImage", Default: "none",
			Format: "none, or an image reference as pyxis takes it ([USER@][REGISTRY#]IMAGE[:TAG], writing # as \\#, or a squashfs path; with ContainerRuntime, that runtime's reference)",
			Why:    "none: ranks run on the host unless the user names an image (--container-image, PYXIS_CONTAINER_IMAGE)",
			parse:  parseNoneString, set: func(s *Settings, v any, src Source) { s.ContainerImage = Setting[string]{v.(string), src} }},
		{Name: "ContainerRuntime", Default: "pyxis",
			Format: "pyxis, podman, apptainer or enroot",
			Why:    "pyxis: the container comes from srun's --container-* options; name a runtime where pyxis is not installed (the shim then starts each trainer through it)",
			parse:  oneOf("pyxis", "podman", "apptainer", "enroot"), set: func(s *Settings, v any, src Source) { s.ContainerRuntime = Setting[string]{v.(string), src} }},
		{Name: "ContainerRegistries", Default: "any",
			Format: "any, or a comma-separated list of registries (nvcr.io,ghcr.io; docker.io for unqualified names; local for image files)",
			Why:    "any: images may come from anywhere the nodes can reach",
			parse:  parseRegistries, set: func(s *Settings, v any, src Source) { s.ContainerRegistries = Setting[[]string]{v.([]string), src} }},
		{Name: "ContainerMounts", Default: "none", Repeat: true,
			Format: "SRC:DST[:FLAGS][,SRC:DST...] as pyxis's --container-mounts (flags joined with +); repeatable; none clears the site's list on a partition line",
			Why:    "none: a job's container sees only what the user mounts (and trainrun's own directories)",
			parse:  parseListItem, set: func(s *Settings, v any, src Source) { appendItem(&s.ContainerMounts, v.(listItem), src) }},
	}
}

// listItem is one value of a repeatable list key; clear: "none".
type listItem struct {
	value string
	clear bool
}

func parseListItem(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return listItem{clear: true}, nil
	}
	if strings.TrimSpace(v) == "" {
		return nil, bad("empty value; give one item, or none")
	}
	return listItem{value: v}, nil
}

// appendItem adds one item (a copy: a partition's list must not share the
// site's backing array).
func appendItem(list *Setting[[]string], it listItem, src Source) {
	if it.clear {
		*list = Setting[[]string]{nil, src}
		return
	}
	*list = Setting[[]string]{append(slices.Clone(list.Value), it.value), src}
}

func parseNoneString(v string) (any, error) {
	if strings.EqualFold(v, "none") {
		return "", nil
	}
	return v, nil
}

func parseRegistries(v string) (any, error) {
	if strings.EqualFold(v, "any") {
		return []string(nil), nil
	}
	var out []string
	for _, r := range strings.Split(v, ",") {
		if r == "" || strings.ContainsAny(r, "/#@ ") {
			return nil, bad("%q is not a registry host (nvcr.io, registry.example.com:5000, docker.io, local)", r)
		}
		out = append(out, strings.ToLower(r))
	}
	return out, nil
}

// containerRows are the keys' rows for `trainrun policy show`.
func (s Settings) containerRows() []Row {
	list := func(v []string, zero, sep string) string {
		if len(v) == 0 {
			return zero
		}
		return strings.Join(v, sep)
	}
	img := s.ContainerImage.Value
	if img == "" {
		img = "none"
	}
	return []Row{
		{"SrunArgs", list(s.SrunArgs.Value, "none", " "), s.SrunArgs.Source},
		{"ContainerImage", img, s.ContainerImage.Source},
		{"ContainerRuntime", s.ContainerRuntime.Value, s.ContainerRuntime.Source},
		{"ContainerRegistries", list(s.ContainerRegistries.Value, "any", ","), s.ContainerRegistries.Source},
		{"ContainerMounts", list(s.ContainerMounts.Value, "none", " "), s.ContainerMounts.Source},
	}
}
