

def test_the_slurm_job_script_round_trips_every_character():
    import ast

    from services.trainer_proxy.planning.slurm_job import job_script

    argv = ["train", "--note", "😀 ünïcode", "$(touch x); `y`"]
    script = job_script(argv, run_id="toy-run-1", service="trainer-proxy")
    line = next(line for line in script.splitlines() if line.startswith("ARGV = "))
    assert ast.literal_eval(line.removeprefix("ARGV = ")) == argv
