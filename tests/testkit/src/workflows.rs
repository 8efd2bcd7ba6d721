//! Workflow files the workflow tests and benchmark share.

/// A fan-out/fan-in workflow named `fan` of `tasks` (at least 3) `echo`
/// tasks: `root`, then `t0`… each depending on it, then `sink` depending
/// on all of them.
pub fn fan_out_fan_in(tasks: usize) -> String {
    assert!(tasks >= 3, "a root, a middle and a sink");
    let middle: Vec<String> = (0..tasks - 2).map(|i| format!("t{i}")).collect();
    let mut file = String::from(
        "name = \"fan\"\n\n[[task]]\nid = \"root\"\nadapter = \"echo\"\nprompt = \"start\"\n",
    );
    for id in &middle {
        file.push_str(&format!(
            "\n[[task]]\nid = \"{id}\"\nadapter = \"echo\"\nprompt = \"work on {{{{task}}}}\"\ndepends_on = [\"root\"]\n"
        ));
    }
    let all: Vec<String> = middle.iter().map(|id| format!("\"{id}\"")).collect();
    file.push_str(&format!(
        "\n[[task]]\nid = \"sink\"\nadapter = \"echo\"\nprompt = \"gather\"\ndepends_on = [{}]\n",
        all.join(", ")
    ));
    file
}
