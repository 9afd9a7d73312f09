//! Text views of a map block: the files of `blocks/X,Y,Z/` (DESIGN.md "The trees").
//!
//! Each view renders deterministically (equal blocks give identical bytes) and parses what a
//! person would type in an editor, rejecting everything else with line, column and reason.
//! Every position is relative to the block's origin (node = 16 · block + relative), so a
//! copied block folder is a correct block at its new place. Metadata folders are the tree's.

mod header;
mod light;
mod nodes;
mod objects;
mod text;
mod timers;

pub use header::{parse_header, render_header};
pub use light::{parse_light, render_light};
pub use nodes::{parse_nodes, render_nodes};
pub use objects::{parse_objects, render_objects};
pub use timers::{parse_timers, render_timers};
