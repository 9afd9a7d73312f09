//! Terrarum TVDA disks (spec version 254) and TEVD v3 disks.
