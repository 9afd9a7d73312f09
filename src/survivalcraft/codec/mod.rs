//! Pure byte codecs of the Survivalcraft formats: chunk records, region files, Project.xml.

pub mod fixed;
pub mod project;
pub mod region;
pub mod xml;
