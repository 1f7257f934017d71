//! Tool annotations, stamped on a whole router at once so that no tool
//! carries its own: a router is read-only as a whole, or its tools are
//! published destructive and not idempotent unless named as ones that only
//! observe. A tool added later without a thought for its annotations is
//! thus advertised as the most dangerous kind (fail closed).

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::ToolAnnotations;

/// What a router's tools can do, which decides their annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Effects {
    /// Every tool only observes: read-only, idempotent, closed-world.
    read_only: bool,
    /// Tools of a router that is not read-only that only observe.
    observing: &'static [&'static str],
    /// Tools that start something running: open-world.
    open_world: &'static [&'static str],
}

impl Effects {
    /// A router whose tools all only observe.
    pub const READ_ONLY: Self = Self { read_only: true, observing: &[], open_world: &[] };

    /// A router whose tools change things, except the `observing` ones
    /// (read-only and idempotent); the `open_world` ones start something
    /// whose effects reach beyond the server.
    pub const fn changing(
        observing: &'static [&'static str],
        open_world: &'static [&'static str],
    ) -> Self {
        Self { read_only: false, observing, open_world }
    }

    /// These annotations on every tool of `router`.
    pub fn stamp<S>(self, router: &mut ToolRouter<S>) {
        for (name, route) in &mut router.map {
            let read_only = self.read_only || self.observing.contains(&name.as_ref());
            let open_world = self.open_world.contains(&name.as_ref());
            route.attr.annotations = Some(ToolAnnotations::from_raw(
                route.attr.title.clone(),
                Some(read_only),
                Some(!read_only),
                Some(read_only),
                Some(open_world),
            ));
        }
    }
}
