//! Survivalcraft worlds: Chunks.dat, Chunks32.dat, Chunks32h.dat, region files, Project.xml.
