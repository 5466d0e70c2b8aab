// Package policy owns the site's admin policy file, trainrun.conf: its syntax
// (slurm.conf style: site-wide Key=Value lines, PartitionName= lines that
// override them), the one table of keys with their defaults, validation that
// names file, line, key and the accepted values, and the effective settings of
// a partition with where each value came from. It is pure: it parses from an
// io.Reader; the trainrun command and the SPANK plugin open the file.
package policy
