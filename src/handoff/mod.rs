//! L4: operations (`read-configuration`, `up`, `exec`, agent handoff). Library code never prints.
